'use strict';
/**
 * Epoch-scoped copies of a tenant root (the ledger `gotry-state/gotry-state.db` and every
 * other file under it), and the restore that verifies them. The holder of epoch n writes
 * only under its own epoch's prefix, create-only, the manifest last; a new holder restores
 * the newest copy that verifies from the epochs between the forgotten floor and its own. A
 * stale holder can still write, but nothing it writes late is ever preferred over a newer
 * tenure's copy. Every rule is the Rust core's; this only moves arguments and results.
 */

const native = require('./native');
const { isDurableStore, nativeDurableStoreOf } = require('./durable-store');
const { checkOf, snapshotOf } = require('./host-functions');
const { nativeLeaseOf } = require('./tenant-lease');
const { guard, settle } = require('./translate');

const { NativeEpochCopies } = native;

/**
 * A tenant root as the host named it. Not resolved here: `''` would become the working
 * directory and pass for a folder, where the core refuses it (and `/`) as a RangeError.
 */
function rootPath(root) {
    if (typeof root !== 'string') {
        const error = new TypeError(`The "root" argument must be of type string. Received ${typeof root}`);
        error.code = 'ERR_INVALID_ARG_TYPE';
        throw error;
    }
    return root;
}

class EpochCopies {
    /** The durable store the copies live in. */
    store;
    #native;

    /**
     * `new EpochCopies(store, { snapshot? })` or `new EpochCopies({ store, snapshot? })`:
     * `store` is a DirectoryDurableStore or a store from openDurableStore.
     *
     * `snapshot(source, image)` (may return a promise) writes a consistent, self-contained
     * image of `source`, a file of a tenant root that this process holds open, to `image`,
     * through the library that holds it: `betterSqlite3Snapshot(Database)` for ledgers open in
     * better-sqlite3. Without it, copying a root with such a file rejects with an Error whose
     * code is GOTRY_TENANT_OPEN_IN_PROCESS: the core's own SQLite would delete the host's WAL.
     */
    constructor(storeOrOptions, options) {
        let store;
        if (isDurableStore(storeOrOptions)) {
            store = storeOrOptions;
            options = options ?? {};
        } else {
            if (storeOrOptions === null || typeof storeOrOptions !== 'object') {
                throw new TypeError('EpochCopies needs a durable store, or an options object { store, snapshot? }');
            }
            if (options !== undefined) throw new TypeError('new EpochCopies(store, options): the first argument must be a durable store');
            options = storeOrOptions;
            store = options.store;
        }
        if (options === null || typeof options !== 'object') throw new TypeError('EpochCopies options must be an object { snapshot? }');
        this.#native = guard(() => new NativeEpochCopies(nativeDurableStoreOf(store), snapshotOf(options.snapshot)));
        this.store = store;
    }

    /**
     * Writes a complete copy of `root` under the lease's epoch: `{ epoch, seq, files, bytes,
     * piecesUploaded, bytesUploaded, piecesReused, bytesReused }` (what it stored, and what of
     * its lineage's earlier copies it references instead).
     * Rejects with FencedError when the gate is closed before the first object or after the
     * manifest, CopyConflictError when anything in this epoch's prefix was not written by
     * this holder, DurableStoreUnavailableError when the store fails, an OpenInProcessError
     * Error when this process holds a file of the root open and there is no `snapshot`, and
     * whatever `snapshot` throws.
     */
    writeCopy(lease, root) {
        return settle(() => this.#native.writeCopy(nativeLeaseOf(lease), rootPath(root)));
    }

    /**
     * Restores the newest copy that verifies into `root` (replaced atomically) and records the
     * tenure: `{ restored: { epoch, seq } | null, skipped: [{ epoch, seq, reason }], files,
     * bytes }`; `restored` is null for an empty start. `verify(dir)` is called with the
     * folder a copy was fetched into, before it is installed; false skips it ('fold').
     * Rejects with RestoreVerificationError (`skipped`) when copies exist but none verifies,
     * with whatever `verify` throws, and with an OpenInProcessError, changing nothing,
     * while this process holds a file of `root` open (close the ledger first).
     */
    restore(lease, root, options = {}) {
        return settle(() => {
            if (options === null || typeof options !== 'object') throw new TypeError('restore options must be an object { verify? }');
            return this.#native.restore(nativeLeaseOf(lease), rootPath(root), checkOf(options.verify));
        });
    }

    /** Every copy of the lease key `<org>/<tenant>` in the store, oldest first, unread. */
    list(key) {
        return settle(() => this.#native.list(key));
    }

    /**
     * Deletes every copy of the epochs up to the lease's forgotten floor (after
     * `lease.markForgotten()`), as read from the lease store now: `[{ epoch, seq }]`.
     * LeaseLostError unless the store still names this holder.
     */
    forgetCopies(lease) {
        return settle(() => this.#native.forgetCopies(nativeLeaseOf(lease)));
    }

    /**
     * Keeps the newest `keep` copies that look valid and deletes the older ones (never the
     * newest valid one): `{ kept, deleted }`, each `[{ epoch, seq }]`, newest first.
     */
    gc(lease, options) {
        return settle(() => {
            if (options === null || typeof options !== 'object') throw new TypeError('gc needs an options object { keep }');
            return this.#native.gc(nativeLeaseOf(lease), options.keep);
        });
    }
}

module.exports = { EpochCopies };
