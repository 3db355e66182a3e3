'use strict';
/**
 * Native errors carry the stable code and the fields as own properties; this turns them into
 * the classes of errors.js, so `instanceof`, `name`, `code`, `record` and `reason` work as with
 * the reference. Anything else (a RangeError, a SQLite code, a host clock's own exception)
 * passes through unchanged.
 */
const errors = require('./errors');

/** One entry per stable code: how to rebuild the class from the native error's fields. */
const FROM_NATIVE = {
    GOTRY_TENANT_LEASE_HELD: e => new errors.LeaseHeldError(e.record),
    GOTRY_TENANT_LEASE_LOST: e => new errors.LeaseLostError(e.message),
    GOTRY_TENANT_FENCED: e => new errors.FencedError(e.reason, e.key, e.epoch),
    GOTRY_TENANT_LEASE_STORE_UNAVAILABLE: e => new errors.LeaseStoreUnavailableError(e.message),
    GOTRY_TENANT_ID_INVALID: e => new errors.InvalidTenantIdError(e.message),
    GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE: e => new errors.DurableStoreUnavailableError(e.message, backendCause(e.backendCode)),
    GOTRY_TENANT_RESTORE_INVALID: e => new errors.RestoreVerificationError(e.message, e.skipped),
    GOTRY_TENANT_COPY_CONFLICT: e => new errors.CopyConflictError(e.message),
    GOTRY_TENANT_DRAINING: e => new errors.TenantDrainingError(e.key),
    GOTRY_TENANT_DRAIN_TIMEOUT: e => new errors.DrainTimeoutError(e.key, e.inFlight, e.timeoutMs),
    GOTRY_TENANT_ROUTER_CLOSED: () => new errors.RouterClosedError(),
    GOTRY_TENANT_REPLICA_AT_CAPACITY: e => new errors.ReplicaAtCapacityError(e.limit),
    GOTRY_TENANT_BUSY: e => new errors.TenantBusyError(e.key, e.running, e.waitedMs),
    GOTRY_TENANT_OPEN_IN_PROCESS: e => new errors.OpenInProcessError(e.message),
    GOTRY_TENANT_CALL_IN_DOUBT: e => new errors.CallInDoubtError(e.key, e.epoch, { cause: translate(e.cause) }),
};

/**
 * The backend's own name for a durable store failure (an errno name such as `ENOTDIR`, or an
 * S3 error code) as the error's `cause`: an Error whose `code` it is, as Node's own file
 * system errors carry theirs.
 */
function backendCause(code) {
    if (typeof code !== 'string') return undefined;
    const cause = new Error(`the durable store's backend answered ${code}`);
    cause.code = code;
    return { cause };
}

/**
 * What a Node host can do about a failure: the core's message names the file and the danger,
 * in the core's words; this adds the names of this package.
 */
const NODE_HINTS = {
    GOTRY_TENANT_OPEN_IN_PROCESS:
        "In Node.js: to copy a root whose ledger the host keeps open, give EpochCopies or TenantRouter.start a snapshot function, { snapshot: betterSqlite3Snapshot(Database) } with the host's own better-sqlite3 class; to restore into a root, close the host's handles on its files first.",
};

function translate(error) {
    if (!(error instanceof Error) || error instanceof errors.TenantStateError) return error;
    const rebuild = Object.hasOwn(FROM_NATIVE, error.code) ? FROM_NATIVE[error.code] : undefined;
    if (rebuild) {
        // The message is the core's, masked of credentials there; a class words its own only
        // for an error a host makes itself. Set before anything reads `stack`, which V8
        // words on first read, so the stack's first line says the same.
        const rebuilt = rebuild(error);
        rebuilt.message = Object.hasOwn(NODE_HINTS, error.code) ? `${error.message}. ${NODE_HINTS[error.code]}` : error.message;
        return rebuilt;
    }
    return error;
}

/**
 * Runs a synchronous native call; what it throws is rethrown translated. The translated error
 * is made here, so its stack starts at the caller's frame that called `guard`.
 */
function guard(call) {
    try {
        return call();
    } catch (error) {
        throw translate(error);
    }
}

function rethrowTranslated(error) {
    throw translate(error);
}

/**
 * Runs a native call that returns a promise; a synchronous throw becomes a rejection too.
 * Written with one `.then` rather than as an async function: every store operation passes
 * here, and the success path then costs one promise reaction instead of an async function's
 * promise, its `await` and its resumption.
 */
function settle(call) {
    let pending;
    try {
        pending = call();
    } catch (error) {
        return Promise.reject(translate(error));
    }
    return pending.then(undefined, rethrowTranslated);
}

module.exports = { FROM_NATIVE, translate, guard, settle };
