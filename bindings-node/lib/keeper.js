'use strict';
/**
 * The lease keeper: one replica keeps many tenant leases alive with batched renewals, run by
 * the Rust core on a thread of its own, so renewals go on while the event loop is busy.
 *
 * Every kept lease has the keeper's store, owner, TTL and margin, and is renewed a fraction of
 * its TTL after its last renewal, many per store transaction. A refused renewal closes the
 * lease's gate and is told as a `lost` event; a fence that passes during a store outage is
 * told as `fenced_locally`, and `resumed` when a later renewal reopens it. Events reach
 * `onEvent` on the event loop; an exception in it never stops the keeper.
 */
const native = require('./native');
const { nativeStoreOf } = require('./store-handles');
const { systemMonotonicClock, keptLease } = require('./tenant-lease');
const { eventDelivery, finalReport } = require('./events');
const { guard, settle } = require('./translate');

const { ManualClock, NativeKeeper } = native;

const INTERNAL = Symbol('gotry lease keeper');
const deliverEvents = eventDelivery('LeaseKeeper', 'keeper', 'GOTRY_KEEPER_ON_EVENT_FAILED');

/**
 * Keepers not yet shut down. Held strongly so that garbage collection cannot stop the
 * renewals of leases whose TenantLease objects the host still uses; the keeper's thread and
 * its wake-ups never keep the process alive.
 */
const running = new Set();

class LeaseKeeper {
    store;
    replicaId;
    ttlMs;
    marginMs;
    clock;
    #native;
    #onEvent;

    constructor(token, options, clock, storeHandle, onEvent) {
        if (token !== INTERNAL) throw new TypeError('a LeaseKeeper is made by LeaseKeeper.start(options)');
        this.#native = guard(() => NativeKeeper.start(
            storeHandle,
            options.replicaId,
            options.ttlMs,
            options.marginMs,
            options.renewFraction,
            options.maxBatch,
            clock instanceof ManualClock ? clock : null,
            onEvent === null ? null : () => this.#deliver(),
            options.withoutThread === true,
        ));
        this.#onEvent = onEvent;
        this.store = options.store;
        this.replicaId = options.replicaId;
        this.ttlMs = options.ttlMs;
        this.marginMs = options.marginMs;
        this.clock = clock;
        running.add(this);
    }

    /**
     * `{ store, replicaId, ttlMs, marginMs, renewFraction?, maxBatch?, clock?, onEvent?,
     * withoutThread? }`. The clock is `systemMonotonicClock` (the default) or a ManualClock:
     * the keeper's own thread reads it, where a JS function cannot be called. The store's
     * clock must be native for the same reason (not a `nowMs` function). With
     * `withoutThread: true`, rounds run only when `tick()` is called.
     */
    static start(options) {
        if (options === null || typeof options !== 'object') {
            throw new TypeError('LeaseKeeper.start needs an options object');
        }
        const clock = options.clock ?? systemMonotonicClock;
        if (clock !== systemMonotonicClock && !(clock instanceof ManualClock)) {
            throw new TypeError("a keeper's clock is systemMonotonicClock or a ManualClock: the keeper's thread reads it");
        }
        const store = nativeStoreOf(options.store);
        if (store.hostClock) {
            throw new TypeError("a keeper's store needs a native clock (the system clock or a ManualClock), not a nowMs function: the keeper's thread reads it");
        }
        const onEvent = options.onEvent ?? null;
        if (onEvent !== null && typeof onEvent !== 'function') throw new TypeError('onEvent must be a function');
        if (options.withoutThread !== undefined && typeof options.withoutThread !== 'boolean') {
            throw new TypeError('withoutThread must be a boolean');
        }
        return new LeaseKeeper(INTERNAL, options, clock, store.native, onEvent);
    }

    /**
     * Acquires `key` for the keeper's owner and keeps it renewed until it is removed, lost or
     * the keeper shuts down. Rejects as TenantLease.acquire does, and with
     * LeaseStoreUnavailableError once the keeper is shut down.
     */
    acquire(key) {
        return settle(async () => keptLease(await this.#native.acquire(key), this, this.clock));
    }

    /**
     * Stops keeping `key` and releases it (the gate closes first, then the store is told);
     * resolves to false when the key was not kept. A store failure rejects after the gate
     * closed: the lease then runs out at its TTL.
     */
    remove(key) {
        return settle(() => this.#native.remove(key));
    }

    /** A TenantLease on the kept lease of `key` (the same gate as acquire's), or undefined. */
    get(key) {
        const held = guard(() => this.#native.get(key));
        return held === null ? undefined : keptLease(held, this, this.clock);
    }

    /** Kept leases, counting any closed through their own handle since the last round. */
    get size() {
        return this.#native.size;
    }

    /**
     * Runs one round now if a lease is due on the keeper's clock; the round's events reach
     * onEvent before the promise settles. A keeper started `withoutThread` needs it called;
     * on one with a thread it only adds a round.
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
     * Stops renewing and releases every kept lease, starting no release after `timeoutMs` on
     * the keeper's clock (by default its TTL, after which every lease has run out anyway).
     * Every event told before the keeper stopped reaches onEvent before the promise settles,
     * and none after. Resolves to `{ released, failed: [{ key, error }], timedOut }`.
     */
    shutdown(timeoutMs) {
        return settle(async () => {
            const report = await finalReport(() => this.#native.shutdown(timeoutMs), () => this.#deliver());
            running.delete(this);
            return report;
        });
    }

    /** Hands the queued events to onEvent, oldest first; never throws. */
    #deliver() {
        deliverEvents(this.#native, this.#onEvent);
    }
}

module.exports = { LeaseKeeper };
