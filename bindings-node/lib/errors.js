'use strict';
/**
 * The typed failures of the tenant-state layer, with the reference's classes, constructors and
 * fields. Callers branch on `code` or on `instanceof`, never on messages: a holder that cannot
 * prove it still owns a tenant stops acknowledging writes for it.
 */

class TenantStateError extends Error {
    code;
    constructor(code, message, options) {
        super(message, options);
        this.name = new.target.name;
        this.code = code;
    }
}

/** Another holder's lease is unexpired; `record` says who, so a router can forward there. */
class LeaseHeldError extends TenantStateError {
    record;
    constructor(record) {
        super('GOTRY_TENANT_LEASE_HELD', `lease ${record.key} is held by ${record.owner} at epoch ${record.epoch}`);
        this.record = record;
    }
}

/** This holder no longer holds the lease (expired, taken over, never held); terminal for it. */
class LeaseLostError extends TenantStateError {
    constructor(message) {
        super('GOTRY_TENANT_LEASE_LOST', message);
    }
}

/** The write gate is closed: this process cannot prove it still owns the tenant. */
class FencedError extends TenantStateError {
    reason;
    constructor(reason, key, epoch) {
        super('GOTRY_TENANT_FENCED', `tenant ${key} epoch ${epoch} is fenced: ${reason}`);
        this.reason = reason;
    }
}

/** The lease store could not answer or was contended; holders keep their local deadline. */
class LeaseStoreUnavailableError extends TenantStateError {
    constructor(message, options) {
        super('GOTRY_TENANT_LEASE_STORE_UNAVAILABLE', message, options);
    }
}

/** An organization id, tenant id, claim or key is not in the fixed, path-safe format. */
class InvalidTenantIdError extends TenantStateError {
    constructor(message) {
        super('GOTRY_TENANT_ID_INVALID', message);
    }
}

/** The durable store failed or could not be reached. */
class DurableStoreUnavailableError extends TenantStateError {
    constructor(message, options) {
        super('GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE', message, options);
    }
}

/** A durable copy exists but cannot be trusted; `skipped` lists what was passed over. */
class RestoreVerificationError extends TenantStateError {
    skipped;
    constructor(message, skipped = []) {
        super('GOTRY_TENANT_RESTORE_INVALID', message);
        this.skipped = skipped;
    }
}

/** Something else wrote into this holder's own epoch prefix: the single writer is broken. */
class CopyConflictError extends TenantStateError {
    constructor(message) {
        super('GOTRY_TENANT_COPY_CONFLICT', message);
    }
}

/** The tenant is being handed off; new work belongs on the next owner. */
class TenantDrainingError extends TenantStateError {
    constructor(key) {
        super('GOTRY_TENANT_DRAINING', `tenant ${key} is being handed off`);
    }
}

/** A handoff stopped waiting for running calls; the tenant serves again and the caller decides. */
class DrainTimeoutError extends TenantStateError {
    inFlight;
    timeoutMs;
    constructor(key, inFlight, timeoutMs) {
        super('GOTRY_TENANT_DRAIN_TIMEOUT', `tenant ${key} still had ${inFlight} call(s) running after ${timeoutMs} ms of draining`);
        this.inFlight = inFlight;
        this.timeoutMs = timeoutMs;
    }
}

/** The router is closed; no tenant can be opened through it any more. */
class RouterClosedError extends TenantStateError {
    constructor() {
        super('GOTRY_TENANT_ROUTER_CLOSED', 'the tenant router is closed');
    }
}

/** This replica serves as many tenants as it is configured to; the request belongs elsewhere. */
class ReplicaAtCapacityError extends TenantStateError {
    limit;
    constructor(limit) {
        super('GOTRY_TENANT_REPLICA_AT_CAPACITY', `this replica already serves its configured maximum of ${limit} tenants`);
        this.limit = limit;
    }
}

/**
 * A copy could not read the tenant's files: `running` calls kept running for `waitedMs`.
 * Nothing was copied; the calls themselves go on.
 */
class TenantBusyError extends TenantStateError {
    key;
    running;
    waitedMs;
    constructor(key, running, waitedMs) {
        super('GOTRY_TENANT_BUSY', `tenant ${key}: ${running} call(s) kept running for ${waitedMs} ms, so no copy could read its files`);
        this.key = key;
        this.running = running;
        this.waitedMs = waitedMs;
    }
}

/**
 * A file is open through another handle of this process, so the library may not open it: copy
 * with a snapshot function (`betterSqlite3Snapshot`), or close the host's handles before a
 * restore. Nothing was touched.
 */
class OpenInProcessError extends TenantStateError {
    constructor(message) {
        super('GOTRY_TENANT_OPEN_IN_PROCESS', message);
    }
}

/**
 * A router call's handler ran and returned, but its acknowledgement could not be confirmed: the
 * gate closed after it, or (strict durability) its copy failed. Its write may be durable or
 * not; `cause` says why. Every other failure of `router.run` comes before the handler ran:
 * nothing was written, a retry is safe.
 */
class CallInDoubtError extends TenantStateError {
    key;
    epoch;
    constructor(key, epoch, options) {
        super('GOTRY_TENANT_CALL_IN_DOUBT', `tenant ${key} epoch ${epoch}: the call ran but its copy is unconfirmed, so its write may or may not be durable`, options);
        this.key = key;
        this.epoch = epoch;
    }
}

module.exports = {
    TenantStateError,
    LeaseHeldError,
    LeaseLostError,
    FencedError,
    LeaseStoreUnavailableError,
    InvalidTenantIdError,
    DurableStoreUnavailableError,
    RestoreVerificationError,
    CopyConflictError,
    TenantDrainingError,
    DrainTimeoutError,
    RouterClosedError,
    ReplicaAtCapacityError,
    TenantBusyError,
    OpenInProcessError,
    CallInDoubtError,
};
