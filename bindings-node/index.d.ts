// Type declarations of @gotry/tenant-state: the exports of gotry's tenant-state modules
// (errors, ids, lease-store, tenant-lease, durable-store, epoch-copies, tenant-router) plus
// LeaseKeeper, ManualClock, openLeaseStore, betterSqlite3Snapshot, ERROR_CODES
// and the core's metrics (metrics, METRICS_CONTENT_TYPE, registerPromClient).

// ---- errors ----------------------------------------------------------------------------

/** The stable codes, in the core's order. */
export type TenantStateErrorCode =
    | 'GOTRY_TENANT_LEASE_HELD'
    | 'GOTRY_TENANT_LEASE_LOST'
    | 'GOTRY_TENANT_FENCED'
    | 'GOTRY_TENANT_LEASE_STORE_UNAVAILABLE'
    | 'GOTRY_TENANT_ID_INVALID'
    | 'GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE'
    | 'GOTRY_TENANT_RESTORE_INVALID'
    | 'GOTRY_TENANT_COPY_CONFLICT'
    | 'GOTRY_TENANT_DRAINING'
    | 'GOTRY_TENANT_DRAIN_TIMEOUT'
    | 'GOTRY_TENANT_ROUTER_CLOSED'
    | 'GOTRY_TENANT_REPLICA_AT_CAPACITY'
    | 'GOTRY_TENANT_BUSY'
    | 'GOTRY_TENANT_OPEN_IN_PROCESS'
    | 'GOTRY_TENANT_CALL_IN_DOUBT';

export declare const ERROR_CODES: readonly TenantStateErrorCode[];

/** The version of the native build loaded (the workspace's one version), e.g. `'0.1.0'`. */
export declare function version(): string;

// ---- metrics ---------------------------------------------------------------------------

/** The media type to serve `metrics()`'s text with: `'text/plain; version=0.0.4; charset=utf-8'`. */
export declare const METRICS_CONTENT_TYPE: string;
/** Every metric family of this process (counted in the core), in the Prometheus text format 0.0.4. */
export declare function metrics(): Promise<string>;
/** The part of a prom-client `Registry` that `registerPromClient` uses. */
export interface PromClientRegistry {
    registerMetric(metric: unknown): void;
}
/**
 * Registers our families in a prom-client registry, so that its `metrics()` serves them beside
 * the host's own; returns the family names registered.
 */
export declare function registerPromClient(registry: PromClientRegistry): string[];

/** Base of every typed failure; branch on `code` or `instanceof`, never on messages. */
export declare class TenantStateError extends Error {
    code: string;
    constructor(code: string, message?: string, options?: ErrorOptions);
}
/** Another holder has an unexpired lease; `record` names it. */
export declare class LeaseHeldError extends TenantStateError {
    record: LeaseRecord;
    constructor(record: LeaseRecord);
}
/** The caller does not hold the lease any more; terminal for that holder. */
export declare class LeaseLostError extends TenantStateError {
    constructor(message: string);
}
export type FenceReason = 'lease_released' | 'lease_lost' | 'lease_expired_locally';
/** The write path must not acknowledge. */
export declare class FencedError extends TenantStateError {
    reason: FenceReason;
    constructor(reason: FenceReason, key: string, epoch: number);
}
/** The lease store could not answer or was contended. */
export declare class LeaseStoreUnavailableError extends TenantStateError {
    constructor(message: string, options?: ErrorOptions);
}
/** An organization id, tenant id, claim or key is not acceptable. */
export declare class InvalidTenantIdError extends TenantStateError {
    constructor(message: string);
}
/**
 * The durable store failed or could not be reached. When the store raised it, `cause` is an
 * Error whose `code` is the backend's own name for the failure: an errno name (`ENOTDIR`,
 * `EROFS`, `ENOSPC`, ...) for a folder, an S3 error code (or the client's) for S3.
 */
export declare class DurableStoreUnavailableError extends TenantStateError {
    cause?: Error & { code: string };
    constructor(message: string, options?: ErrorOptions);
}
/** Copies exist but none can be trusted; `skipped` lists every one passed over, newest first. */
export declare class RestoreVerificationError extends TenantStateError {
    skipped: SkippedCopy[];
    constructor(message: string, skipped?: SkippedCopy[]);
}
/** Something else wrote into this holder's own epoch prefix: the single writer is broken. */
export declare class CopyConflictError extends TenantStateError {
    constructor(message: string);
}
export declare class TenantDrainingError extends TenantStateError {
    constructor(key: string);
}
export declare class DrainTimeoutError extends TenantStateError {
    inFlight: number;
    timeoutMs: number;
    constructor(key: string, inFlight: number, timeoutMs: number);
}
export declare class RouterClosedError extends TenantStateError {
    constructor();
}
export declare class ReplicaAtCapacityError extends TenantStateError {
    limit: number;
    constructor(limit: number);
}
/** A copy could not read the tenant's files while `running` calls kept running; nothing copied. */
export declare class TenantBusyError extends TenantStateError {
    key: string;
    running: number;
    waitedMs: number;
    constructor(key: string, running: number, waitedMs: number);
}
/**
 * A file is open through another handle of this process: copy with a snapshot function
 * (`betterSqlite3Snapshot`), close the host's handles before a restore. Nothing was touched.
 */
export declare class OpenInProcessError extends TenantStateError {
    constructor(message: string);
}
/**
 * A router call's handler ran, but its acknowledgement could not be confirmed (the gate closed
 * after it, or in strict durability its copy failed): the write may be durable or not; `cause`
 * says why. Every other failure of `run` comes before the handler: nothing written, retry safe.
 */
export declare class CallInDoubtError extends TenantStateError {
    key: string;
    epoch: number;
    cause?: Error;
    constructor(key: string, epoch: number, options?: ErrorOptions);
}

// ---- ids -------------------------------------------------------------------------------

export declare function assertOrganizationId(value: unknown): string;
export declare function assertLedgerTenantId(value: unknown): string;
export declare function assertPromptCachePartition(value: unknown): string;
/** `t-` + the first 128 bits of HMAC-SHA256(organizationKey, issuer 0x00 subject). */
export declare function deriveLedgerTenantId(organizationKey: Uint8Array, issuer: string, subject: string): string;
/** `pc-` + the first 128 bits of HMAC-SHA256(organizationKey, context 0x00 ledgerTenantId). */
export declare function derivePromptCachePartition(organizationKey: Uint8Array, ledgerTenantId: string): string;
export declare function leaseKeyFor(organizationId: string, ledgerTenantId: string): string;
export declare function tenantRootFor(stateRoot: string, organizationId: string, ledgerTenantId: string): string;

// ---- lease store -----------------------------------------------------------------------

export declare const MIN_LEASE_TTL_MS: number;
export declare const MAX_LEASE_TTL_MS: number;
/** Throws a RangeError unless `ttlMs` is an integer within [MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS]. */
export declare function assertLeaseTtl(ttlMs: number): void;

export interface LeaseRecord {
    key: string;
    owner: string;
    epoch: number;
    leaseUntilMs: number;
    forgottenAtEpoch: number;
}
export interface LeaseGrant {
    record: LeaseRecord;
    ttlMs: number;
}
export interface LeaseHistoryEntry {
    key: string;
    op: 'acquire' | 'renew' | 'release' | 'forget';
    owner: string;
    epoch: number;
    atMs: number;
}

/**
 * One lease's answer in `renewBatch`: the grant, or the refusal of that lease alone
 * (LeaseLostError; RangeError for a key of the wrong length or an epoch below 1).
 */
export type RenewAnswer =
    | { ok: true; grant: LeaseGrant }
    | { ok: false; error: TenantStateError | RangeError };

/** What every store of this package offers; TenantLease and LeaseKeeper hold leases in any of them. */
export interface LeaseStore {
    /**
     * The store's clock, in integer milliseconds. For a store opened by URL it is the clock the
     * store decides on (a MySQL server's, read in one round trip).
     */
    nowMs: () => number;
    read(key: string): Promise<LeaseRecord | null>;
    acquire(key: string, owner: string, ttlMs: number): Promise<LeaseGrant>;
    renew(key: string, owner: string, epoch: number, ttlMs: number): Promise<LeaseGrant>;
    /**
     * Renews many leases of `owner` in one store transaction (one durable write). One answer
     * per `[key, epoch]` pair, in order. Rejects as a whole when the store fails, or when the
     * call is malformed (owner, TTL, a pair that is not `[string, safe integer]`).
     */
    renewBatch(owner: string, ttlMs: number, leases: ReadonlyArray<readonly [key: string, epoch: number]>): Promise<RenewAnswer[]>;
    release(key: string, owner: string, epoch: number): Promise<LeaseRecord>;
    markForgotten(key: string, owner: string, epoch: number): Promise<LeaseRecord>;
    /**
     * Every granted operation in order, of one key or of all. Synchronous as in the reference:
     * on a MySQL store it waits for the server on the event loop (use `historyAsync` there).
     */
    history(key?: string): LeaseHistoryEntry[];
    /**
     * `history` as a promise that waits off the event loop, queued behind the calls made on
     * this store before it: on SQLite it sees them without awaiting them (a MySQL store runs
     * calls side by side: await them first). Rejects with the errors `history` throws.
     */
    historyAsync(key?: string): Promise<LeaseHistoryEntry[]>;
    /**
     * The store's clock as a promise that waits off the event loop: a MySQL server's clock
     * without blocking the loop for the round trip; a `nowMs` function's reading, taken when
     * called. Rejects with the errors `nowMs()` throws.
     */
    nowMsAsync(): Promise<number>;
    close(): void;
}

export interface SqliteLeaseStoreOptions {
    path: string;
    /**
     * The store's clock: a function returning integer milliseconds (read when each call is
     * made) or a ManualClock; Date.now's clock when omitted.
     */
    nowMs?: (() => number) | ManualClock;
}

/** The lease store on one SQLite file, shareable with the reference implementation. */
export declare class SqliteLeaseStore {
    constructor(options: SqliteLeaseStoreOptions);
}
/** Merged with the class above: a SqliteLeaseStore has every member of LeaseStore. */
export interface SqliteLeaseStore extends LeaseStore {}

/**
 * Opens the store a URL names: `sqlite:///var/lib/gotry/leases.db`,
 * `mysql://user:password@host:3306/database?prefix=gotry_&timeout_ms=2000`, or
 * `postgres://user:password@host:5432/database?prefix=gotry_&timeout_ms=2000` (also
 * `postgresql://`). A server store connects while it opens, on a thread of the addon's, not
 * the event loop (up to the URL's `timeout_ms` when the server does not answer). Rejects with
 * a RangeError for a bad URL and a LeaseStoreUnavailableError when the store cannot be reached.
 */
export declare function openLeaseStore(url: string): Promise<LeaseStore>;

// ---- clocks and the tenant lease -------------------------------------------------------

export interface MonotonicClock {
    nowMs(): number;
}

export declare const systemMonotonicClock: MonotonicClock;

/** A clock that moves only when told to; usable as a store clock and as a holder clock. */
export declare class ManualClock implements MonotonicClock {
    constructor(startMs?: number);
    nowMs(): number;
    set(nowMs: number): void;
    /** Moves the clock by `deltaMs` and returns the new reading. */
    advance(deltaMs: number): number;
}

export interface TenantLeaseOptions {
    key: string;
    replicaId: string;
    store: LeaseStore;
    ttlMs: number;
    marginMs: number;
    clock?: MonotonicClock;
}

/** The holder side of a tenant lease. */
export declare class TenantLease {
    readonly key: string;
    readonly replicaId: string;
    readonly epoch: number;
    readonly forgottenAtEpoch: number;
    readonly store: LeaseStore;
    readonly clock: MonotonicClock;
    readonly ttlMs: number;
    readonly marginMs: number;
    private constructor();
    static acquire(options: TenantLeaseOptions): Promise<TenantLease>;
    /** The synchronous write gate; throws FencedError unless the lease is provably held. */
    assertHeld(): void;
    isHeld(): boolean;
    remainingMs(): number;
    renew(): Promise<void>;
    release(): Promise<void>;
    markForgotten(): Promise<LeaseRecord>;
}

// ---- durable stores ----------------------------------------------------------------------

export interface ObjectInfo {
    key: string;
    size: number;
}

/**
 * A durable store of this package. Keys are `/`-separated `[A-Za-z0-9._-]` segments that do
 * not start with `.` (anything else is a RangeError). Every failure to reach or use the store
 * rejects with DurableStoreUnavailableError.
 */
export interface DurableStore {
    /** Where the store is, as a URL without any credential: safe to log. */
    readonly location: string;
    /** Creates `key` holding `bytes` unless an object of that name exists, which it leaves as it is. */
    putNew(key: string, bytes: Uint8Array): Promise<'created' | 'alreadyExists'>;
    /** The whole object (a Buffer), or null when there is none of that name. */
    get(key: string): Promise<Uint8Array | null>;
    /** Every object whose key starts with `prefix` ('' for all), ordered by key. */
    list(prefix?: string): Promise<ObjectInfo[]>;
    /** Removing an object that is not there is not an error. */
    delete(key: string): Promise<void>;
}

export interface DirectoryDurableStoreOptions {
    /** The folder, created with its parents when missing. */
    path: string;
}

/** The store in one folder (a local disk or a shared volume); opening is synchronous. */
export declare class DirectoryDurableStore implements DurableStore {
    constructor(options: DirectoryDurableStoreOptions);
    readonly location: string;
    putNew(key: string, bytes: Uint8Array): Promise<'created' | 'alreadyExists'>;
    get(key: string): Promise<Uint8Array | null>;
    list(prefix?: string): Promise<ObjectInfo[]>;
    delete(key: string): Promise<void>;
}

/**
 * Opens the store a URL names: `file:///abs/dir`, `file:rel/dir`, or
 * `s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1` (an S3 store proves at
 * open, in round trips, that the server refuses a second create of one name).
 */
export declare function openDurableStore(url: string): Promise<DurableStore>;

// ---- epoch copies --------------------------------------------------------------------------

/** A copy's place in the order restores follow: epoch first, then sequence. */
export interface CopyId {
    epoch: number;
    seq: number;
}

export type SkipReason = 'manifest' | 'tenant' | 'checksum' | 'integrity' | 'fold' | 'superseded';

/** A copy a restore passed over, and why. */
export interface SkippedCopy extends CopyId {
    reason: SkipReason;
}

/** A copy taken as written: its manifest is durable and the gate held after it. */
export interface WrittenCopy extends CopyId {
    files: number;
    bytes: number;
    /**
     * Objects this copy stored beside its manifest (whole files and deltas of changed blocks too
     * large to ride inline in it).
     */
    piecesUploaded: number;
    /** Bytes of all this copy made, those its manifest carries inline included. */
    bytesUploaded: number;
    /** Objects of earlier copies of its lineage it references instead of storing them again. */
    piecesReused: number;
    bytesReused: number;
}

/** What a restore installed (`null`: an empty start) and passed over, newest first. */
export interface RestoreReport {
    restored: CopyId | null;
    skipped: SkippedCopy[];
    files: number;
    bytes: number;
}

export interface RestoreOptions {
    /**
     * The host's own check of a fetched copy (gotry verifies its ledger's fold), given the
     * folder it was fetched into, before it is installed: false skips the copy ('fold'); a
     * throw or a rejection rejects the restore with that value. It must not wait for a copy
     * call of the same tenant, which waits for this restore.
     */
    verify?: (dir: string) => boolean | Promise<boolean>;
}

/** One copy as the store lists it, without reading it. */
export interface CopyListing extends CopyId {
    /** The manifest is there: the copy exists (which does not say it verifies). */
    complete: boolean;
    objects: number;
    bytes: number;
}

export interface GcOptions {
    /** How many valid copies to keep, at least 1. */
    keep: number;
}

export interface GcReport {
    kept: CopyId[];
    deleted: CopyId[];
}

/**
 * Writes a consistent, self-contained image of `source` (a file of a tenant root that this
 * process holds open, such as a ledger open in better-sqlite3) to `image` (a fresh path in a
 * scratch folder), through the library that holds it. A throw or a rejection fails the copy
 * with that value.
 */
export type HostSnapshot = (source: string, image: string) => void | Promise<void>;

export interface HostSnapshotOptions {
    /**
     * How copies read the files this process holds open. Without it, a copy of a root with
     * such a file rejects with an OpenInProcessError (`GOTRY_TENANT_OPEN_IN_PROCESS`): the addon's own
     * SQLite, closing its connection, would drop the host's locks and delete its WAL.
     */
    snapshot?: HostSnapshot;
}

export interface EpochCopiesOptions extends HostSnapshotOptions {
    store: DurableStore;
}

/** The part of better-sqlite3's `Database` class that betterSqlite3Snapshot uses. */
export interface BetterSqlite3Class {
    new (filename: string, options?: { readonly?: boolean; fileMustExist?: boolean }): {
        serialize(): Uint8Array;
        close(): unknown;
    };
}

/**
 * The snapshot function for ledgers the host keeps open in better-sqlite3. Pass the host's
 * own class (`betterSqlite3Snapshot(require('better-sqlite3'))`): a better-sqlite3 loaded from
 * another path is a second SQLite library in the process, with the same defect as the
 * addon's. It opens the file read-only with that class and writes the image page for page
 * with `db.serialize()` (one read transaction, laid out as the ledger is, so a copy stores
 * only the blocks that changed), on the event loop; a held file that is not a SQLite database
 * is copied as it is.
 */
export declare function betterSqlite3Snapshot(Database: BetterSqlite3Class): (source: string, image: string) => Promise<void>;

/**
 * Epoch-scoped copies of tenant roots in one durable store. A `lease` is a TenantLease of this
 * package (from TenantLease.acquire or a LeaseKeeper).
 */
export declare class EpochCopies {
    readonly store: DurableStore;
    constructor(options: EpochCopiesOptions);
    constructor(store: DurableStore, options?: HostSnapshotOptions);
    /** Writes a complete copy of `root` under the lease's epoch, create-only, manifest last. */
    writeCopy(lease: TenantLease, root: string): Promise<WrittenCopy>;
    /**
     * Restores the newest copy that verifies into `root`, atomically, and records the tenure.
     * Rejects with an OpenInProcessError, changing nothing, while this process holds a
     * file of `root` open.
     */
    restore(lease: TenantLease, root: string, options?: RestoreOptions): Promise<RestoreReport>;
    /** Every copy of the lease key `<org>/<tenant>`, oldest first. */
    list(key: string): Promise<CopyListing[]>;
    /** Deletes the copies of epochs up to the forgotten floor the lease store names now. */
    forgetCopies(lease: TenantLease): Promise<CopyId[]>;
    /** Keeps the newest `keep` valid copies, deletes the older ones; never the newest valid one. */
    gc(lease: TenantLease, options: GcOptions): Promise<GcReport>;
}

// ---- the lease keeper ------------------------------------------------------------------

/**
 * What happened to a kept lease without the host asking, told on the event loop:
 * - `lost`: the store refused a renewal (another replica may hold the tenant now); the keeper
 *   dropped the lease and its gate answers FencedError(lease_lost).
 * - `fenced_locally`: the fence passed before a renewal was granted (the store could not be
 *   reached); the gate answers FencedError(lease_expired_locally). Told once until it resumes.
 * - `resumed`: a renewal at the same epoch moved the fence ahead again; the gate is open.
 * - `renew_failed`: a round could not renew `leases` leases (the store failed); they are tried
 *   again.
 */
export type KeeperEvent =
    | { kind: 'lost'; key: string; epoch: number; error: LeaseLostError }
    | { kind: 'fenced_locally'; key: string; epoch: number }
    | { kind: 'resumed'; key: string; epoch: number }
    | { kind: 'renew_failed'; error: Error; leases: number };

export interface LeaseKeeperOptions {
    /** A store of this package whose clock is native (not a `nowMs` function). */
    store: LeaseStore;
    /** The owner of every kept lease. */
    replicaId: string;
    ttlMs: number;
    marginMs: number;
    /** The part of the TTL between two renewals of a lease; 1/3 by default. */
    renewFraction?: number;
    /** The most leases per store transaction; 1000 by default. */
    maxBatch?: number;
    /** `systemMonotonicClock` (the default) or a ManualClock: the keeper's thread reads it. */
    clock?: MonotonicClock;
    /**
     * Told each event on the event loop. If it throws, or returns a promise that rejects, the
     * failure is emitted as a process warning (name LeaseKeeperWarning, code
     * GOTRY_KEEPER_ON_EVENT_FAILED, the failure as its `cause`) and the keeper carries on.
     */
    onEvent?: (event: KeeperEvent) => unknown;
    /** When true, rounds run only when `tick()` is called (tests, or a host's own timer). */
    withoutThread?: boolean;
}

/** What one round did. */
export interface TickReport {
    /** Store calls made. */
    batches: number;
    renewed: number;
    lost: number;
    /** Due leases not renewed, to be tried again. */
    failed: number;
    /** When the next round is due on the keeper's clock; null when no lease is kept. */
    nextDueMs: number | null;
}

/** What shutdown did with each kept lease; each list is ordered by key. */
export interface ShutdownReport {
    /** Released in the store: the next owner may start at once. */
    released: string[];
    /** Gate closed, but the store could not be told: the lease runs out at its TTL. */
    failed: Array<{ key: string; error: Error }>;
    /** Not reached before the deadline: no longer renewed, it runs out on its own. */
    timedOut: string[];
}

/**
 * Keeps many leases of one owner on one store alive with batched renewals, on a thread of
 * its own. It never keeps the process alive, and it is not garbage collected before
 * `shutdown()`.
 */
export declare class LeaseKeeper {
    readonly store: LeaseStore;
    readonly replicaId: string;
    readonly ttlMs: number;
    readonly marginMs: number;
    readonly clock: MonotonicClock;
    private constructor();
    static start(options: LeaseKeeperOptions): LeaseKeeper;
    /** Acquires `key` and keeps it renewed; rejects as TenantLease.acquire does. */
    acquire(key: string): Promise<TenantLease>;
    /** Stops keeping `key` and releases it; false when it was not kept. */
    remove(key: string): Promise<boolean>;
    /** A TenantLease on the kept lease of `key` (the same gate as acquire's), if any. */
    get(key: string): TenantLease | undefined;
    /** Kept leases, counting any closed through their own handle since the last round. */
    readonly size: number;
    /** Runs one round if a lease is due; its events reach onEvent before this settles. */
    tick(): Promise<TickReport>;
    /**
     * Releases every kept lease, starting none after `timeoutMs` (default: the TTL); every
     * event reaches onEvent before this settles, and none after.
     */
    shutdown(timeoutMs?: number): Promise<ShutdownReport>;
}

// ---- the tenant router -------------------------------------------------------------------

/**
 * When copies are taken: `async` copies every written tenant in the background, once per
 * `intervalMs` (default 30 000), a failing store showing as lag and `copy_failed` events;
 * `strict` resolves each call only once a copy holds it.
 */
export interface CopyPolicy {
    intervalMs?: number;
    durability?: 'async' | 'strict';
}

/**
 * What the router tells without being asked, on the event loop:
 * - `lost`: the lease was lost; the tenant's calls are FencedError from now on.
 * - `closed`: the tenant's last call ended after a loss or a handoff: its files may be closed.
 * - `copy_failed`: a background copy failed; the tenant's lag grows until one succeeds.
 * - `draining`: a handoff (or close) began draining the tenant, before it waits for the calls
 *   in flight; new calls are TenantDrainingError from now on. Told once per drain: stop
 *   routing the tenant's requests here. `closed` follows when it is released; a drain that
 *   timed out is the handoff's DrainTimeoutError, and the tenant serves again.
 * - `copied`: a background copy (`async`) was written, `seq` its place in the epoch and
 *   `bytesUploaded` what it stored: the tenant's writes before it are durable. Told once per
 *   copy the router writes in the background, never for the copy a `strict` call or a handoff
 *   waits for (their own answer says it).
 */
export type RouterEvent =
    | { kind: 'lost'; key: string; epoch: number }
    | { kind: 'closed'; key: string; epoch: number }
    | { kind: 'copy_failed'; key: string; epoch: number; error: Error }
    | { kind: 'draining'; key: string; epoch: number }
    | { kind: 'copied'; key: string; epoch: number; seq: number; bytesUploaded: number };

export interface TenantRouterOptions extends HostSnapshotOptions {
    /** A lease store of this package whose clock is native (not a `nowMs` function). */
    leaseStore: LeaseStore;
    durableStore: DurableStore;
    /** Every tenant's root is `tenantRootFor(stateRoot, organization, tenant)`. */
    stateRoot: string;
    replicaId: string;
    ttlMs: number;
    marginMs: number;
    /** The most tenants served at once; by default what the descriptor limit allows. */
    capacity?: number;
    copyPolicy?: CopyPolicy;
    /** The host's check of a restored copy, as in EpochCopies' restore. */
    verify?: (dir: string) => boolean | Promise<boolean>;
    /**
     * Told each event on the event loop. A throw or a rejection is emitted as a process
     * warning (TenantRouterWarning, code GOTRY_ROUTER_ON_EVENT_FAILED) and the router goes on.
     */
    onEvent?: (event: RouterEvent) => unknown;
    /**
     * The router's clock, on which its keeper, its gates and every timing rule run (copy
     * interval, lag, a drain's timeout): `systemMonotonicClock` (the default) or a ManualClock.
     */
    clock?: MonotonicClock;
    /**
     * When true, the router runs no thread of its own (neither the keeper's renewals nor the
     * background copies): rounds run only when `tick()` is called (tests with a ManualClock,
     * or a host's own timer), and nothing renews the leases between two ticks.
     */
    withoutThread?: boolean;
    /**
     * How many copies of each tenant the router keeps, deleting older ones as it writes new
     * ones (a strict router writes one per acknowledged write): by default the core's number;
     * 0 keeps every copy, for a host that runs `EpochCopies.gc` itself.
     */
    keepCopies?: number;
    /**
     * When true, `metrics()` (and a registry given to `registerPromClient`) carries a series
     * per tenant this router lists, labelled `replica` and `tenant` (the lease key): its state
     * (`gotry_tenant_router_tenant_state{state}` 1), calls in flight and copy lag in seconds
     * and in writes, read at each scrape and gone once the tenant leaves. Bounded by
     * `capacity`; off by the core's default, since each tenant is a series on the metrics server.
     */
    tenantMetrics?: boolean;
}

/** What one router round did. */
export interface RouterTickReport {
    /** The keeper's round: leases renewed, lost (each also told as `lost`), to be tried again. */
    keeper: TickReport;
    /** Tenants copied in the background by this round, by key; each also told as `copied`. */
    copied: string[];
    /** Tenants whose due copy failed, by key; each also told as `copy_failed`, with why. */
    failed: string[];
    /** When the next round is due on the router's clock; null when nothing is kept. */
    nextDueMs: number | null;
}

/** A tenant this router serves. */
export interface TenantHandle {
    /** `<organization>/<tenant>`. */
    readonly key: string;
    /** The tenant's folder on this replica. */
    readonly root: string;
    /** The tenure's fencing token. */
    readonly epoch: number;
    /** The copy the tenure started from; null for an empty start. */
    readonly restoredFrom: CopyId | null;
    /** The synchronous write gate: throws FencedError unless the lease is provably held. */
    assertHeld(): void;
    isHeld(): boolean;
}

/** How long a handoff or close waits for running calls; the core's default (one TTL) if absent. */
export interface HandoffOptions {
    timeoutMs?: number;
}
export type TenantState = 'opening' | 'serving' | 'draining' | 'lost' | 'closed';

/** One tenant, as operators and metrics see it. */
export interface TenantStatus {
    key: string;
    state: TenantState;
    /** 0 while the tenant is being opened. */
    epoch: number;
    inFlight: number;
    lastCopy: CopyId | null;
    /** Calls acknowledged since the last good copy began. */
    writesSinceCopy: number;
    /** Milliseconds since the last good copy began (since the tenant opened, before one). */
    lagMs: number;
    /** Why the last copy failed, if it did. */
    lastCopyError: string | null;
}

/** What close did with every tenant; each list is ordered by key. */
export interface CloseReport {
    handedOff: string[];
    /** Calls still ran at the timeout: not copied, and released by the stopping keeper. */
    timedOut: string[];
    failed: Array<{ key: string; error: Error }>;
}

/**
 * One replica serving many tenants: leases kept by one keeper, copies restored before a
 * tenant's first call and taken as the copy policy says, calls counted and gated, handoffs.
 * It never keeps the process alive, and it is not garbage collected before `close()`.
 */
export declare class TenantRouter {
    readonly leaseStore: LeaseStore;
    readonly durableStore: DurableStore;
    readonly stateRoot: string;
    readonly replicaId: string;
    readonly ttlMs: number;
    readonly marginMs: number;
    private constructor();
    static start(options: TenantRouterOptions): Promise<TenantRouter>;
    /** The most tenants this replica serves at once. */
    readonly capacity: number;
    /**
     * Serves the tenant: ReplicaAtCapacityError before anything is touched, LeaseHeldError
     * (`record.owner` serves it), TenantDrainingError, RouterClosedError, or as a restore fails.
     */
    open(organization: string, tenant: string): Promise<TenantHandle>;
    /**
     * One call of a served tenant; resolves to what `fn` resolves to (in strict durability,
     * once a copy holds it). Refused before `fn` ran (nothing written, a retry is safe):
     * RouterClosedError, LeaseLostError, TenantDrainingError, FencedError. After `fn`
     * returned, when the gate closed meanwhile or (strict) its copy failed: CallInDoubtError,
     * whose `cause` says why; the write may be durable or not. A throw of `fn` rejects with
     * that value, the call unacknowledged.
     */
    run<T>(key: string, fn: (handle: TenantHandle) => T | Promise<T>): Promise<T>;
    /**
     * Drains, copies, releases; DrainTimeoutError (the tenant serving again) after
     * `timeoutMs` (default: the core's, one TTL). A bare number is taken as `timeoutMs`.
     */
    handoff(key: string, options?: HandoffOptions | number): Promise<void>;
    /**
     * Hands every tenant off (`timeoutMs` each), then refuses every open with
     * RouterClosedError; opens in flight reject so too, and a tenant whose drain timed out
     * shows `closed` until its last call ends.
     */
    close(options?: HandoffOptions | number): Promise<CloseReport>;
    /**
     * Runs one round on the router's clock (due renewals, then due background copies); its
     * events reach onEvent before this settles. Needed when started `withoutThread`.
     */
    tick(): Promise<RouterTickReport>;
    /** Every tenant this replica knows, ordered by key. */
    status(): TenantStatus[];
}
