'use strict';
/**
 * The holder side of a tenant lease, held by the Rust core:
 *
 *     fence = sentAt + grantedTtl - margin
 *
 * measured on the holder's monotonic clock from before the request, so the round trip and any
 * clock skew only make the holder stop earlier. `assertHeld()` is the synchronous write gate.
 * `renew()` and `release()` take their place in the holder's queue when they are called and
 * settle in that order, while the store work runs on the addon's threads.
 */
const { performance } = require('node:perf_hooks');
const native = require('./native');
const { nativeStoreOf, wallReading } = require('./store-handles');
const { Handles } = require('./handles');
const { guard, settle } = require('./translate');

const { ManualClock } = native;

/** The process's monotonic clock. A lease given this object reads the same clock natively. */
const systemMonotonicClock = Object.freeze({ nowMs: () => performance.now() });

const INTERNAL = Symbol('gotry native lease');

/** The native holder of every TenantLease made here; EpochCopies writes and restores under it. */
const holders = new Handles('lease must be a TenantLease of @gotry/tenant-state (TenantLease.acquire or a LeaseKeeper)');

function nativeLeaseOf(lease) {
    return holders.of(lease);
}

/** How the core reads a holder's clock: natively when it can, through the JS function otherwise. */
function clockArguments(clock) {
    if (clock === systemMonotonicClock) return [null, null];
    if (clock instanceof ManualClock) return [clock, null];
    if (clock === null || typeof clock !== 'object' || typeof clock.nowMs !== 'function') {
        throw new TypeError('clock must be an object with a nowMs() method');
    }
    return [null, () => clock.nowMs()];
}

class TenantLease {
    key;
    replicaId;
    epoch;
    /** Durable copies of epochs up to this one are dead; fixed for the whole tenure. */
    forgottenAtEpoch;
    store;
    clock;
    ttlMs;
    marginMs;
    #native;
    /** Settles after the last renew or release called so far has settled. */
    #tail = Promise.resolve();

    constructor(token, options, clock, held) {
        if (token !== INTERNAL) throw new TypeError('a TenantLease is made by TenantLease.acquire(options)');
        this.key = held.key;
        this.replicaId = held.replicaId;
        this.epoch = held.epoch;
        this.forgottenAtEpoch = held.forgottenAtEpoch;
        this.store = options.store;
        this.clock = clock;
        this.ttlMs = options.ttlMs;
        this.marginMs = options.marginMs;
        this.#native = held;
        holders.set(this, held);
    }

    /**
     * `{ key, replicaId, store, ttlMs, marginMs, clock? }`. Rejects with LeaseHeldError when
     * another holder's lease is unexpired, LeaseLostError when the round trip used up the grant
     * (handed back first), LeaseStoreUnavailableError when the store cannot answer.
     */
    static async acquire(options) {
        if (options === null || typeof options !== 'object') {
            throw new TypeError('TenantLease.acquire needs an options object');
        }
        const clock = options.clock ?? systemMonotonicClock;
        const [manualClock, clockFn] = clockArguments(clock);
        const store = nativeStoreOf(options.store);
        const held = await settle(() =>
            native.acquireLease(
                store.native,
                options.key,
                options.replicaId,
                options.ttlMs,
                options.marginMs,
                manualClock,
                clockFn,
                wallReading(options.store),
            ),
        );
        return new TenantLease(INTERNAL, options, clock, held);
    }

    /** The synchronous gate of the write path: throws FencedError unless provably held. */
    assertHeld() {
        guard(() => this.#native.assertHeld());
    }

    isHeld() {
        return this.#native.isHeld();
    }

    /** Milliseconds until the local fence; zero or negative once fenced. */
    remainingMs() {
        return guard(() => this.#native.remainingMs());
    }

    /** Extends the lease (same epoch). A refusal is terminal; other failures keep the deadline. */
    renew() {
        return this.#inCallOrder(() => this.#native.renew(wallReading(this.store)));
    }

    /** Stops acknowledging, then tells the store, so the next owner can start at once. */
    release() {
        return this.#inCallOrder(() => this.#native.release(wallReading(this.store)));
    }

    /**
     * Starts `call` now (the core queues it behind the earlier ones, so the work runs in call
     * order) and settles it only after the earlier calls settled: two threads that finish
     * back to back may report to the JS thread in either order.
     */
    #inCallOrder(call) {
        const outcome = settle(call);
        // Marked handled now; the caller still sees a rejection through the returned promise.
        outcome.catch(() => {});
        const settled = this.#tail.then(() => outcome);
        this.#tail = settled.then(
            () => {},
            () => {},
        );
        return settled;
    }

    /** Marks every durable copy up to this epoch dead; requires a provably held lease. */
    markForgotten() {
        return settle(() => this.#native.markForgotten(wallReading(this.store)));
    }
}

/**
 * The TenantLease of a lease that a LeaseKeeper holds: `held` is its native handle, `keeper`
 * gives the store, TTL and margin, `clock` the keeper's clock.
 */
function keptLease(held, keeper, clock) {
    return new TenantLease(INTERNAL, keeper, clock, held);
}

module.exports = {
    systemMonotonicClock,
    TenantLease,
    // Internal to this package (not re-exported by index.js).
    keptLease,
    nativeLeaseOf,
};
