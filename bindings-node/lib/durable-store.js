'use strict';
/**
 * Durable stores: where a tenant's copies outlive the replica that wrote them. Puts are
 * create-only, which is what fences a stale holder: it can add objects under its own epoch
 * but never replace what another holder wrote. Every failure to reach or use a store is a
 * DurableStoreUnavailableError whose `cause.code` is the backend's own code.
 *
 * Calls run on the addon's threads for durable work, never on those that renew leases.
 */
const native = require('./native');
const { Handles } = require('./handles');
const { guard, settle } = require('./translate');

const { NativeDurableStore } = native;

/** The native handle of every store made here; EpochCopies needs it. */
const handles = new Handles('store must be a durable store of @gotry/tenant-state (DirectoryDurableStore or openDurableStore)');
const INTERNAL = Symbol('gotry durable store');

function isDurableStore(value) {
    return handles.has(value);
}

function nativeDurableStoreOf(store) {
    return handles.of(store);
}

/** A durable store backed by the core; made by DirectoryDurableStore and openDurableStore. */
class DurableStore {
    constructor(token, handle) {
        if (token !== INTERNAL) throw new TypeError('use new DirectoryDurableStore({ path }) or openDurableStore(url)');
        handles.set(this, handle);
    }

    /** Where the store is, as a URL without any credential: safe to log. */
    get location() {
        return handles.get(this).location;
    }

    /** Creates `key` holding `bytes` unless it exists: 'created' or 'alreadyExists'. */
    putNew(key, bytes) {
        return settle(() => handles.get(this).putNew(key, bytes));
    }

    /** The object's bytes, or null when there is none of that name. */
    get(key) {
        return settle(() => handles.get(this).get(key));
    }

    /** `{ key, size }` of every object whose key starts with `prefix`, ordered by key. */
    list(prefix = '') {
        return settle(() => handles.get(this).list(prefix));
    }

    /** Removes `key`; removing an object that is not there is not an error. */
    delete(key) {
        return settle(() => handles.get(this).delete(key));
    }
}

/**
 * `{ path }`: the store in one folder, on a local disk or a volume that replicas share,
 * created with its parents when missing. Opening is synchronous, as a SqliteLeaseStore's is.
 */
function openDirectory(options) {
    if (options === null || typeof options !== 'object') {
        throw new TypeError('DirectoryDurableStore needs an options object { path }');
    }
    const { path } = options;
    if (typeof path !== 'string') {
        const error = new TypeError(`The "path" argument must be of type string. Received ${typeof path}`);
        error.code = 'ERR_INVALID_ARG_TYPE';
        throw error;
    }
    return guard(() => NativeDurableStore.openDirectory(path));
}

class DirectoryDurableStore extends DurableStore {
    constructor(options) {
        super(INTERNAL, openDirectory(options));
    }
}

/**
 * Opens the store a URL names: `file:///abs/dir`, `file:rel/dir`, or
 * `s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1` (credentials from the
 * AWS environment variables or the URL). Asynchronous: an S3 store first proves that the
 * server refuses a second create of one name, which takes round trips.
 */
function openDurableStore(url) {
    return settle(async () => new DurableStore(INTERNAL, await native.openDurableStore(url)));
}

module.exports = {
    DirectoryDurableStore,
    openDurableStore,
    // Internal to this package (not re-exported by index.js).
    isDurableStore,
    nativeDurableStoreOf,
};
