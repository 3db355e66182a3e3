'use strict';
/**
 * The typed failures of the tenant-state layer, with the reference's classes, constructors and
 * fields. Callers branch on `code` or on `instanceof`, never on messages: a holder that cannot
 * prove it still owns a tenant stops acknowledging writes for it.
 *
 * Each message is the core's template for the code (`errorTypes()`), filled here from the
 * constructor's fields: an error a host constructs itself says what the core's would. The
 * errors the core raises arrive with the core's message already (see translate.js).
 */
const { errorTypes } = require('./native');

const TEMPLATES = new Map(errorTypes().map(type => [type.code, type.template]));

/**
 * The core's template of `code` with `values` (keyed by the core's snake_case field names) in
 * its `{field}` and `{field.part}` places, each written as a template literal writes it; a
 * place whose field is not in `values` stays as it is, as in the core's `fill_template`. A
 * template that is one field alone (a message passed through) gives what `new Error(value)`
 * would: '' for no value, as the reference's constructors do.
 */
function messageOf(code, values) {
    const template = TEMPLATES.get(code);
    const alone = /^\{([^}.]*)\}$/.exec(template);
    if (alone && values[alone[1]] === undefined) return '';
    return template.replace(/\{([^}]*)\}/g, (place, name) => {
        const [field, ...parts] = name.split('.');
        if (!Object.hasOwn(values, field)) return place;
        return String(parts.reduce((value, part) => value[part], values[field]));
    });
}

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
        super('GOTRY_TENANT_LEASE_HELD', messageOf('GOTRY_TENANT_LEASE_HELD', { record }));
        this.record = record;
    }
}

/** This holder no longer holds the lease (expired, taken over, never held); terminal for it. */
class LeaseLostError extends TenantStateError {
    constructor(message) {
        super('GOTRY_TENANT_LEASE_LOST', messageOf('GOTRY_TENANT_LEASE_LOST', { message }));
    }
}

/** The write gate is closed: this process cannot prove it still owns the tenant. */
class FencedError extends TenantStateError {
    reason;
    constructor(reason, key, epoch) {
        super('GOTRY_TENANT_FENCED', messageOf('GOTRY_TENANT_FENCED', { reason, key, epoch }));
        this.reason = reason;
    }
}

/** The lease store could not answer or was contended; holders keep their local deadline. */
class LeaseStoreUnavailableError extends TenantStateError {
    constructor(message, options) {
        super('GOTRY_TENANT_LEASE_STORE_UNAVAILABLE', messageOf('GOTRY_TENANT_LEASE_STORE_UNAVAILABLE', { message }), options);
    }
}

/** An organization id, tenant id, claim or key is not in the fixed, path-safe format. */
class InvalidTenantIdError extends TenantStateError {
    constructor(message) {
        super('GOTRY_TENANT_ID_INVALID', messageOf('GOTRY_TENANT_ID_INVALID', { message }));
    }
}

/** The durable store failed or could not be reached. */
class DurableStoreUnavailableError extends TenantStateError {
    constructor(message, options) {
        super('GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE', messageOf('GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE', { message }), options);
    }
}

/** A durable copy exists but cannot be trusted; `skipped` lists what was passed over. */
class RestoreVerificationError extends TenantStateError {
    skipped;
    constructor(message, skipped = []) {
        super('GOTRY_TENANT_RESTORE_INVALID', messageOf('GOTRY_TENANT_RESTORE_INVALID', { message }));
        this.skipped = skipped;
    }
}

/** Something else wrote into this holder's own epoch prefix: the single writer is broken. */
class CopyConflictError extends TenantStateError {
    constructor(message) {
        super('GOTRY_TENANT_COPY_CONFLICT', messageOf('GOTRY_TENANT_COPY_CONFLICT', { message }));
    }
}

/** The tenant is being handed off; new work belongs on the next owner. */
class TenantDrainingError extends TenantStateError {
    constructor(key) {
        super('GOTRY_TENANT_DRAINING', messageOf('GOTRY_TENANT_DRAINING', { key }));
    }
}

/** A handoff stopped waiting for running calls; the tenant serves again and the caller decides. */
class DrainTimeoutError extends TenantStateError {
    inFlight;
    timeoutMs;
    constructor(key, inFlight, timeoutMs) {
        super('GOTRY_TENANT_DRAIN_TIMEOUT', messageOf('GOTRY_TENANT_DRAIN_TIMEOUT', { key, in_flight: inFlight, timeout_ms: timeoutMs }));
        this.inFlight = inFlight;
        this.timeoutMs = timeoutMs;
    }
}

/** The router is closed; no tenant can be opened through it any more. */
class RouterClosedError extends TenantStateError {
    constructor() {
        super('GOTRY_TENANT_ROUTER_CLOSED', messageOf('GOTRY_TENANT_ROUTER_CLOSED', {}));
    }
}

/** This replica serves as many tenants as it is configured to; the request belongs elsewhere. */
class ReplicaAtCapacityError extends TenantStateError {
    limit;
    constructor(limit) {
        super('GOTRY_TENANT_REPLICA_AT_CAPACITY', messageOf('GOTRY_TENANT_REPLICA_AT_CAPACITY', { limit }));
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
        super('GOTRY_TENANT_BUSY', messageOf('GOTRY_TENANT_BUSY', { key, running, waited_ms: waitedMs }));
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
        super('GOTRY_TENANT_OPEN_IN_PROCESS', messageOf('GOTRY_TENANT_OPEN_IN_PROCESS', { message }));
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
        super('GOTRY_TENANT_CALL_IN_DOUBT', messageOf('GOTRY_TENANT_CALL_IN_DOUBT', { key, epoch }), options);
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
