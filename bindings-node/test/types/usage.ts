// Compiled (not run) by types.test.js: code written against the reference type-checks here.
import {
    deriveLedgerTenantId, derivePromptCachePartition, leaseKeyFor, tenantRootFor, assertOrganizationId,
    SqliteLeaseStore, TenantLease, ManualClock, systemMonotonicClock, openLeaseStore, assertLeaseTtl,
    MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS, ERROR_CODES, LeaseHeldError, FencedError, TenantStateError,
    LeaseKeeper, LeaseLostError, DirectoryDurableStore, openDurableStore, EpochCopies,
    DurableStoreUnavailableError, RestoreVerificationError, betterSqlite3Snapshot, TenantRouter,
    ReplicaAtCapacityError, DrainTimeoutError, metrics, METRICS_CONTENT_TYPE, registerPromClient,
    type TenantHandle, type TenantStatus, type RouterEvent, type CloseReport, type HostSnapshot, type RouterTickReport,
    type DurableStore, type RestoreReport, type SkipReason, type WrittenCopy, type CopyListing, type GcReport,
    type CopyId, type ObjectInfo,
    type LeaseRecord, type LeaseGrant, type LeaseStore, type TenantStateErrorCode, type FenceReason,
    type KeeperEvent, type TickReport, type ShutdownReport, type RenewAnswer,
} from '@gotry/tenant-state';
import { Registry } from 'prom-client';

declare function use(...values: unknown[]): void;

async function usage(): Promise<void> {
    const key = new Uint8Array(32);
    const tenant: string = deriveLedgerTenantId(key, 'issuer', 'subject');
    const partition: string = derivePromptCachePartition(key, tenant);
    const leaseKey: string = leaseKeyFor(assertOrganizationId('acme'), tenant);
    const root: string = tenantRootFor('/srv/state', 'acme', tenant);
    assertLeaseTtl(MIN_LEASE_TTL_MS + MAX_LEASE_TTL_MS);
    const codes: readonly TenantStateErrorCode[] = ERROR_CODES;
    const scraped: string = await metrics();
    const served: string[] = registerPromClient(new Registry());
    use(scraped, served, METRICS_CONTENT_TYPE.length);

    const clock = new ManualClock(0);
    const store = new SqliteLeaseStore({ path: '/tmp/x.db', nowMs: clock });
    const jsClocked = new SqliteLeaseStore({ path: '/tmp/y.db', nowMs: () => Date.now() });
    const byUrl: LeaseStore = await openLeaseStore('sqlite:/tmp/z.db');
    const grant: LeaseGrant = await store.acquire(leaseKey, 'replica', 1_000);
    const record: LeaseRecord | null = await jsClocked.read(leaseKey);
    const history = store.history(leaseKey);
    const op: 'acquire' | 'renew' | 'release' | 'forget' = history[0].op;
    const opened: LeaseStore = await openLeaseStore('mysql://gotry@db:3306/gotry?timeout_ms=500');
    const logged: LeaseRecord['epoch'] = (await opened.historyAsync(leaseKey))[0].epoch;
    const serverNow: number = await opened.nowMsAsync();

    const lease = await TenantLease.acquire({ key: leaseKey, replicaId: 'r', store, ttlMs: 1_000, marginMs: 100, clock });
    const lease2 = await TenantLease.acquire({ key: 'k', replicaId: 'r', store: byUrl, ttlMs: 1_000, marginMs: 100, clock: systemMonotonicClock });
    const lease3 = await TenantLease.acquire({ key: 'k', replicaId: 'r', store, ttlMs: 1_000, marginMs: 100, clock: { nowMs: () => 1 } });
    lease.assertHeld();
    const held: boolean = lease2.isHeld();
    const remaining: number = lease3.remainingMs();
    await lease.renew();
    const forgotten: LeaseRecord = await lease.markForgotten();
    await lease.release();
    try {
        await store.acquire('k', 'o', 100);
    } catch (error) {
        if (error instanceof LeaseHeldError) use(error.record.owner, error.code);
        if (error instanceof FencedError) { const reason: FenceReason = error.reason; use(reason); }
        if (error instanceof TenantStateError) use(error.code, error.name);
    }

    const answers: RenewAnswer[] = await store.renewBatch('replica', 1_000, [[leaseKey, 1], ['other', 2]]);
    for (const answer of answers) {
        if (answer.ok) use(answer.grant.record.leaseUntilMs);
        else use(answer.error.message);
    }
    const keeper = LeaseKeeper.start({
        store, replicaId: 'r', ttlMs: 30_000, marginMs: 1_000, renewFraction: 0.25, maxBatch: 500, clock, withoutThread: true,
        onEvent: (event: KeeperEvent) => {
            if (event.kind === 'lost') { const lost: LeaseLostError = event.error; use(lost, event.key, event.epoch); }
            if (event.kind === 'renew_failed') use(event.leases, event.error.message);
        },
    });
    const kept: TenantLease = await keeper.acquire(leaseKey);
    kept.assertHeld();
    const again: TenantLease | undefined = keeper.get(leaseKey);
    const removed: boolean = await keeper.remove(leaseKey);
    const tick: TickReport = await keeper.tick();
    const next: number | null = tick.nextDueMs;
    const report: ShutdownReport = await keeper.shutdown();
    use(again?.epoch, removed, next, keeper.size, report.released, report.failed[0]?.error, report.timedOut);

    const directory = new DirectoryDurableStore({ path: '/tmp/copies' });
    const durable: DurableStore = await openDurableStore('s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1');
    const outcome: 'created' | 'alreadyExists' = await directory.putNew('a/b', new Uint8Array([1]));
    const bytes: Uint8Array | null = await directory.get('a/b');
    const objects: ObjectInfo[] = await durable.list('a/');
    await durable.delete('a/b');
    const copies = new EpochCopies({ store: directory });
    const written: WrittenCopy = await copies.writeCopy(lease, root);
    const uploaded: number = written.bytesUploaded + written.piecesUploaded + written.bytesReused + written.piecesReused;
    const restored: RestoreReport = await copies.restore(kept, root, { verify: async dir => dir.length > 0 });
    const from: CopyId | null = restored.restored;
    const listed: CopyListing[] = await copies.list(leaseKey);
    const gc: GcReport = await copies.gc(lease, { keep: 2 });
    const forgottenCopies: CopyId[] = await copies.forgetCopies(lease);
    try {
        await copies.restore(lease, root);
    } catch (error) {
        if (error instanceof RestoreVerificationError) { const reason: SkipReason = error.skipped[0].reason; use(reason); }
        if (error instanceof DurableStoreUnavailableError) use(error.cause?.code);
    }
    use(directory.location, outcome, bytes?.length, objects[0]?.size, written.seq, uploaded, from?.epoch, listed[0]?.complete, gc.kept, forgottenCopies);

    // Host snapshots: the class is the host's better-sqlite3 (here, a stand-in of its shape).
    class FakeDatabase {
        constructor(readonly filename: string, readonly options?: { readonly?: boolean; fileMustExist?: boolean }) {}
        serialize() { return new Uint8Array(0); }
        close() { return this; }
    }
    const snapshot: HostSnapshot = betterSqlite3Snapshot(FakeDatabase);
    const live = new EpochCopies(directory, { snapshot });
    const alsoLive = new EpochCopies({ store: directory, snapshot: async (source: string, image: string) => use(source, image) });
    use(live.store, alsoLive);

    const router: TenantRouter = await TenantRouter.start({
        leaseStore: store, durableStore: directory, stateRoot: '/srv/state', replicaId: 'r', ttlMs: 30_000, marginMs: 3_000,
        capacity: 100, copyPolicy: { intervalMs: 10_000, durability: 'strict' }, snapshot, verify: () => true, clock,
        withoutThread: true, tenantMetrics: true,
        onEvent: (event: RouterEvent) => {
            if (event.kind === 'copy_failed') use(event.error.message);
            if (event.kind === 'draining') use(event.key);
            if (event.kind === 'copied') use(event.seq + event.bytesUploaded);
            use(event.key, event.epoch);
        },
    });
    const handle: TenantHandle = await router.open('acme', tenant);
    handle.assertHeld();
    const written2: number = await router.run(handle.key, async (h: TenantHandle) => h.epoch + (h.restoredFrom?.seq ?? 0));
    await router.handoff(handle.key, 1_000);
    const statuses: TenantStatus[] = router.status();
    const round: RouterTickReport = await router.tick();
    use(round.keeper.renewed, round.copied[0], round.failed.length, round.nextDueMs ?? 0);
    const closed: CloseReport = await router.close();
    try {
        await router.open('acme', tenant);
    } catch (error) {
        if (error instanceof ReplicaAtCapacityError) use(error.limit);
        if (error instanceof DrainTimeoutError) use(error.inFlight, error.timeoutMs);
    }
    use(router.capacity, written2, statuses[0]?.lastCopy?.seq, statuses[0]?.state, closed.handedOff, closed.failed[0]?.error);

    store.close();
    use(tenant, partition, root, codes, grant.ttlMs, record?.epoch, held, remaining, forgotten.epoch, clock.advance(5));
}

void usage;
