'use strict';
/**
 * The tenant router: one replica serves many tenants. It holds their leases with one keeper
 * (renewed in batches on a native thread), restores each tenant's newest valid copy before
 * its first call, counts the calls in flight and checks the write gate around each, copies
 * tenants that were written (in the background, or before each acknowledgement in strict
 * durability), and hands tenants off: drain, final copy, release. Every rule is the Rust
 * core's (`core/src/router/`); this only moves arguments, results and events, and runs each
 * blocking step on the addon's threads, never on the event loop.
 *
 * Errors: ReplicaAtCapacityError (`limit`) before anything is touched, LeaseHeldError with
 * the holder's `record` (forward to `record.owner`), TenantDrainingError during a handoff,
 * DrainTimeoutError (`inFlight`, `timeoutMs`) when a handoff gave up and the tenant serves
 * again, RouterClosedError after close; a call whose handler ran but cannot be acknowledged
 * is CallInDoubtError (see `run`).
 */
const native = require('./native');
const { nativeDurableStoreOf } = require('./durable-store');
const { checkOf, snapshotOf } = require('./host-functions');
const { nativeStoreOf } = require('./store-handles');
const { systemMonotonicClock } = require('./tenant-lease');
const { eventDelivery, finalReport } = require('./events');
const { guard, settle } = require('./translate');

const { ManualClock, NativeRouter, durabilities } = native;

const INTERNAL = Symbol('gotry tenant router');
const deliverEvents = eventDelivery('TenantRouter', 'router', 'GOTRY_ROUTER_ON_EVENT_FAILED');

/**
 * Routers not yet closed. Held strongly so that garbage collection cannot stop the renewals
 * of the tenants a router serves; its threads and wake-ups never keep the process alive.
 */
const running = new Set();

function invalidValue(message) {
    const error = new TypeError(message);
    error.code = 'ERR_INVALID_ARG_VALUE';
    return error;
}

/**
 * `{ intervalMs, durability }`: the copy policy's JS shape checked here, its words the core's
 * (`durabilities()`); an absent durability is the core's default.
 */
function copyPolicyOf(policy) {
    if (policy === undefined || policy === null) return { intervalMs: null, durability: null };
    const words = durabilities();
    const shape = `{ intervalMs?, durability?: ${words.map(word => `'${word}'`).join(' | ')} }`;
    if (typeof policy !== 'object') throw new TypeError(`copyPolicy must be an object ${shape}`);
    const { durability = null, intervalMs = null } = policy;
    if (durability !== null && !words.includes(durability)) {
        throw invalidValue(`copyPolicy.durability must be one of ${words.map(word => `'${word}'`).join(', ')}, got ${typeof durability === 'string' ? `'${durability}'` : typeof durability}`);
    }
    return { intervalMs, durability };
}

/**
 * A tenant this router serves: `key` (`<org>/<tenant>`), `root` (its folder), `epoch` (its
 * tenure's fencing token) and `restoredFrom` (the copy the tenure started from, `{ epoch,
 * seq }`, or null for an empty start); `assertHeld()` is the synchronous write gate.
 */
class TenantHandle {
    key;
    root;
    epoch;
    restoredFrom;
    #native;

    constructor(token, handle) {
        if (token !== INTERNAL) throw new TypeError('a TenantHandle is made by TenantRouter.open or run');
        this.#native = handle;
        this.key = handle.key;
        this.root = handle.root;
        this.epoch = handle.epoch;
        this.restoredFrom = handle.restoredFrom;
    }

    /** Throws FencedError unless the tenant's lease is provably held: check before acknowledging. */
    assertHeld() {
        guard(() => this.#native.assertHeld());
    }

    isHeld() {
        return this.#native.isHeld();
    }
}

class TenantRouter {
    leaseStore;
    durableStore;
    stateRoot;
    replicaId;
    ttlMs;
    marginMs;
    #native;
    #onEvent;

    constructor(token, options, leaseStore, durableStore, policy, clock, onEvent) {
        if (token !== INTERNAL) throw new TypeError('a TenantRouter is made by TenantRouter.start(options)');
        this.#onEvent = onEvent;
        this.#native = guard(() => NativeRouter.start(
            leaseStore.native,
            durableStore,
            options.stateRoot,
            options.replicaId,
            options.ttlMs,
            options.marginMs,
            options.capacity,
            policy.intervalMs,
            policy.durability,
            clock instanceof ManualClock ? clock : null,
            checkOf(options.verify),
            snapshotOf(options.snapshot),
            onEvent === null ? null : () => this.#deliver(),
            options.withoutThread === true,
            options.keepCopies,
            options.tenantMetrics,
        ));
        this.leaseStore = options.leaseStore;
        this.durableStore = options.durableStore;
        this.stateRoot = options.stateRoot;
        this.replicaId = options.replicaId;
        this.ttlMs = options.ttlMs;
        this.marginMs = options.marginMs;
        running.add(this);
    }

    /**
     * `{ leaseStore, durableStore, stateRoot, replicaId, ttlMs, marginMs, capacity?,
     * copyPolicy?: { intervalMs?, durability?: one of durabilities() }, verify?, snapshot?,
     * onEvent?, clock?, withoutThread?, keepCopies?, tenantMetrics? }`. The lease store's clock must be native (the keeper's
     * thread reads it), and so must `clock` (`systemMonotonicClock`, the default, or a
     * ManualClock), on which every timing rule of the router runs. With `withoutThread: true`
     * the router runs no thread of its own: rounds run only when `tick()` is called.
     * `capacity` defaults to what the descriptor limit allows; the copy policy to a copy
     * every 30 s of written tenants, in the background (`async`); `keepCopies` to the core's
     * number of copies kept per tenant (0 keeps every copy); `tenantMetrics: true` adds each
     * tenant's series (state, copy lag, calls in flight, labelled `tenant`) to `metrics()`,
     * off by the core's default. `verify(dir)` checks a
     * restored copy (as EpochCopies' restore does), `snapshot(source, image)` reads the files
     * the host holds open (as EpochCopies' does), `onEvent(event)` is told `lost`, `closed`,
     * `copy_failed`, `draining` and `copied` on the event loop.
     */
    static async start(options) {
        if (options === null || typeof options !== 'object') {
            throw new TypeError('TenantRouter.start needs an options object');
        }
        const leaseStore = nativeStoreOf(options.leaseStore);
        if (leaseStore.hostClock) {
            throw new TypeError("a router's lease store needs a native clock (the system clock or a ManualClock), not a nowMs function: its keeper's thread reads it");
        }
        const durableStore = nativeDurableStoreOf(options.durableStore);
        if (typeof options.stateRoot !== 'string') {
            const error = new TypeError(`The "stateRoot" argument must be of type string. Received ${typeof options.stateRoot}`);
            error.code = 'ERR_INVALID_ARG_TYPE';
            throw error;
        }
        const clock = options.clock ?? systemMonotonicClock;
        if (clock !== systemMonotonicClock && !(clock instanceof ManualClock)) {
            throw new TypeError("a router's clock is systemMonotonicClock or a ManualClock: its keeper's thread reads it");
        }
        const onEvent = options.onEvent ?? null;
        if (onEvent !== null && typeof onEvent !== 'function') throw new TypeError('onEvent must be a function');
        if (options.withoutThread !== undefined && typeof options.withoutThread !== 'boolean') {
            throw new TypeError('withoutThread must be a boolean');
        }
        if (options.tenantMetrics != null && typeof options.tenantMetrics !== 'boolean') {
            throw new TypeError('tenantMetrics must be a boolean');
        }
        const policy = copyPolicyOf(options.copyPolicy);
        return new TenantRouter(INTERNAL, options, leaseStore, durableStore, policy, clock, onEvent);
    }

    /** The most tenants this replica serves at once. */
    get capacity() {
        return this.#native.capacity;
    }

    /**
     * Serves `<organization>/<tenant>` on this replica: acquires its lease and restores its
     * newest valid copy into its root, before any call can run. Resolves to its TenantHandle
     * (the same tenure's handle when it is served already). Rejects with
     * ReplicaAtCapacityError, LeaseHeldError (`record.owner` serves it), TenantDrainingError,
     * RouterClosedError, and as EpochCopies' restore does.
     */
    open(organization, tenant) {
        return settle(async () => {
            try {
                return new TenantHandle(INTERNAL, await this.#native.open(organization, tenant));
            } finally {
                this.#deliver();
            }
        });
    }

    /**
     * Runs `fn(handle)` as one call of the served tenant `key`, and resolves to what it
     * returns (or resolves to). The call is counted in flight and the write gate checked
     * before it starts and after it returns; in strict durability it resolves only once a
     * copy holds the call. Refused before `fn` ran (nothing was written, a retry is safe):
     * RouterClosedError, LeaseLostError (`key` not served here, or still being opened),
     * TenantDrainingError (a handoff), FencedError (the lease was lost). After `fn` returned:
     * CallInDoubtError, whose `cause` says why (FencedError: the gate closed meanwhile; in
     * strict durability the copy's failure or TenantBusyError): the write may be durable, so
     * the host must not report it as refused. When `fn` throws, the call ends unacknowledged
     * and run rejects with that very value.
     */
    async run(key, fn) {
        if (typeof fn !== 'function') throw new TypeError('run needs a function (handle) => value | Promise<value>');
        const call = await settle(() => this.#native.begin(key));
        let value;
        try {
            value = await fn(new TenantHandle(INTERNAL, call.handle));
        } catch (error) {
            call.abandon();
            throw error;
        }
        await settle(() => call.finish());
        return value;
    }

    /**
     * Hands `key` off: refuses new calls (TenantDrainingError) while the running ones finish,
     * takes a final copy, releases the lease (the next replica may open it at once). When
     * calls still run after `options.timeoutMs` (default: the core's, one TTL), rejects with
     * DrainTimeoutError and the tenant serves again, nothing copied or released; when the
     * final copy fails, it serves again too. The `closed` event reaches onEvent before this
     * settles. `options` is `{ timeoutMs? }`; a bare number is taken as `timeoutMs`.
     */
    handoff(key, options) {
        return settle(async () => {
            try {
                return await this.#native.handoff(key, timeoutOf(options));
            } finally {
                this.#deliver();
            }
        });
    }

    /**
     * Hands every tenant off (`options.timeoutMs` each, default: the core's, one TTL; a bare
     * number is taken as `timeoutMs`), then refuses every later
     * open with RouterClosedError and stops the keeper (which releases the leases of tenants
     * whose handoff timed out). Resolves to `{ handedOff: [key], timedOut: [key], failed:
     * [{ key, error }] }`.
     */
    close(options) {
        return settle(async () => {
            const report = await finalReport(() => this.#native.close(timeoutOf(options)), () => this.#deliver());
            running.delete(this);
            return report;
        });
    }

    /**
     * Runs one round on the router's clock: the keeper's renewals that are due (a lease the
     * store refuses is lost), then the background copies that are due. Resolves to `{ keeper:
     * TickReport, copied: [key], failed: [key], nextDueMs }`; the round's events reach onEvent
     * before it settles. A router started `withoutThread` needs it called; on one with threads
     * it only adds a round.
     */
    tick() {
        return settle(async () => {
            try {
                return await this.#native.tick();
            } finally {
                this.#deliver();
            }
        });
    }

    /**
     * Every tenant this replica knows, ordered by key: `{ key, state, epoch, inFlight,
     * lastCopy, writesSinceCopy, lagMs, lastCopyError }`. Synchronous: it reads counters.
     */
    status() {
        return this.#native.status();
    }

    /** Hands the queued events to onEvent, oldest first; never throws. */
    #deliver() {
        deliverEvents(this.#native, this.#onEvent);
    }
}

/**
 * The `timeoutMs` of a handoff's or close's options (`{ timeoutMs? }`, or the number itself);
 * `undefined` leaves the default to the core. The number is checked by the native side.
 */
function timeoutOf(options) {
    if (options === undefined || options === null || typeof options !== 'object') return options;
    return options.timeoutMs;
}

module.exports = { TenantRouter, TenantHandle };
