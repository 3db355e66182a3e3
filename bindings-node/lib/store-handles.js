'use strict';
/**
 * The native side of the lease stores that lease-store.js makes, for the modules of this
 * package that hold leases in them; not part of the package's API.
 */
const { Handles } = require('./handles');

/** The native handle of every store made here; TenantLease needs it to hold a lease natively. */
const handles = new Handles('store must be a lease store of @gotry/tenant-state (SqliteLeaseStore or openLeaseStore)');

/** The store clock reading a call carries when the store's clock is a JS function. */
function wallReading(store) {
    return handles.get(store).hostClock ? store.nowMs() : undefined;
}

function nativeStoreOf(store) {
    return handles.of(store);
}

module.exports = { handles, wallReading, nativeStoreOf };
