'use strict';
/**
 * The lease store: one record per tenant saying which replica may write its ledger, and at
 * which epoch, decided by the Rust core as a compare-and-set per key on the store's clock.
 *
 * Unlike the reference, every operation that may wait for SQLite's write lock runs on the
 * addon's threads, one store's operations in call order, so the event loop keeps turning
 * while another process holds the lock. The
 * methods are async (they reject, never throw); `history` and `close` stay synchronous.
 * Opening by URL is a promise, as a server store connects while it opens; on a server store
 * the synchronous `history` and `nowMs` wait for the network on the event loop, so each has a
 * promise form that waits on the addon's threads.
 */
const native = require('./native');
const { handles, wallReading } = require('./store-handles');
const { guard, settle, translate } = require('./translate');

const { MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS, ManualClock, NativeStore } = native;

/** Throws a RangeError unless `ttlMs` is an integer within [MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS]. */
function assertLeaseTtl(ttlMs) {
    guard(() => native.assertLeaseTtl(ttlMs));
}

const INTERNAL = Symbol('gotry native store');

/** A lease store backed by the core; made by SqliteLeaseStore and openLeaseStore. */
class NativeLeaseStore {
    /** The store's clock, callable as in the reference (`store.nowMs()`). */
    nowMs;

    constructor(token, handle, nowMs) {
        if (token !== INTERNAL) throw new TypeError('use new SqliteLeaseStore(options) or openLeaseStore(url)');
        handles.set(this, { native: handle, hostClock: handle.hostClock });
        this.nowMs = nowMs;
    }

    read(key) {
        return settle(() => handles.get(this).native.read(key));
    }

    acquire(key, owner, ttlMs) {
        return settle(() => handles.get(this).native.acquire(key, owner, ttlMs, wallReading(this)));
    }

    renew(key, owner, epoch, ttlMs) {
        return settle(() => handles.get(this).native.renew(key, owner, epoch, ttlMs, wallReading(this)));
    }

    /**
     * Renews many leases of `owner` in one store transaction (one durable write for the lot).
     * Resolves to one answer per `[key, epoch]` pair, in order: `{ ok: true, grant }`, or
     * `{ ok: false, error }` for a lease refused on its own (LeaseLostError; RangeError for a
     * key of the wrong length or an epoch below 1). Rejects as a whole when the store fails or
     * the call itself is malformed.
     */
    renewBatch(owner, ttlMs, leases) {
        return settle(async () => {
            if (!Array.isArray(leases)) throw new TypeError('leases must be an array of [key, epoch] pairs');
            const answers = await handles.get(this).native.renewBatch(owner, ttlMs, leases, wallReading(this));
            return answers.map(answer => (answer.ok ? answer : { ok: false, error: translate(answer.error) }));
        });
    }

    release(key, owner, epoch) {
        return settle(() => handles.get(this).native.release(key, owner, epoch, wallReading(this)));
    }

    markForgotten(key, owner, epoch) {
        return settle(() => handles.get(this).native.markForgotten(key, owner, epoch, wallReading(this)));
    }

    /**
     * `history` as a promise, queued behind the calls made on this store before it (on SQLite
     * it sees them without awaiting them); the form to use on a MySQL store, whose synchronous
     * `history` waits for the server on the loop.
     */
    historyAsync(key) {
        return settle(() => handles.get(this).native.historyAsync(key));
    }

    /**
     * The store's clock as a promise, on every store: a MySQL server's clock is read without
     * blocking the loop; a JS clock function is read now and its reading resolved.
     */
    nowMsAsync() {
        return settle(() => handles.get(this).native.nowMsAsync(wallReading(this)));
    }

    /** Every granted operation in order, of one key or of all. */
    history(key) {
        return guard(() => handles.get(this).native.history(key));
    }

    close() {
        guard(() => handles.get(this).native.close());
    }
}

/**
 * `{ path, nowMs }` as in the reference. `nowMs` may be a function returning integer
 * milliseconds (read on the JS thread when each call is made) or a native ManualClock (read
 * inside the transaction, as the system clock is when `nowMs` is omitted).
 */
function openSqlite(options) {
    if (options === null || typeof options !== 'object') {
        throw new TypeError('SqliteLeaseStore needs an options object { path, nowMs? }');
    }
    const { path, nowMs } = options;
    if (typeof path !== 'string') {
        const error = new TypeError(`The "path" argument must be of type string. Received ${typeof path}`);
        error.code = 'ERR_INVALID_ARG_TYPE';
        throw error;
    }
    if (nowMs === undefined) return [guard(() => NativeStore.openSqlite(path, null, false)), Date.now];
    if (nowMs instanceof ManualClock) return [guard(() => NativeStore.openSqlite(path, nowMs, false)), () => nowMs.nowMs()];
    if (typeof nowMs === 'function') return [guard(() => NativeStore.openSqlite(path, null, true)), nowMs];
    throw new TypeError('nowMs must be a function returning milliseconds or a ManualClock');
}

class SqliteLeaseStore extends NativeLeaseStore {
    constructor(options) {
        const [handle, nowMs] = openSqlite(options);
        super(INTERNAL, handle, nowMs);
    }
}

/**
 * Opens the store that a URL names: `sqlite:///var/lib/gotry/leases.db`, or
 * `mysql://user:password@host:3306/database?prefix=gotry_`. A promise, opened on a thread of
 * the addon's: a server store connects while it opens, and a server that does not answer would
 * otherwise hold the event loop for the URL's whole `timeout_ms`. The store's `nowMs()` reads
 * the clock the store decides on (for a server store, the server's, in one round trip).
 */
function openLeaseStore(url) {
    return settle(() => NativeStore.openUrl(url)).then(storeOfUrl);
}

function storeOfUrl(handle) {
    // The clock of the store's decisions: for MySQL the server's, which a client's clock may
    // disagree with by seconds.
    const nowMs = () => guard(() => handle.nowMs());
    return new NativeLeaseStore(INTERNAL, handle, nowMs);
}

module.exports = {
    MIN_LEASE_TTL_MS,
    MAX_LEASE_TTL_MS,
    assertLeaseTtl,
    SqliteLeaseStore,
    openLeaseStore,
};
