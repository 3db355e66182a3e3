'use strict';
/**
 * @gotry/tenant-state: the per-tenant state layer (tenant ids, the lease store, the tenant
 * lease, durable stores and epoch-scoped copies) on the shared Rust core, with the exports of
 * gotry's JavaScript modules errors.js, ids.js, lease-store.js, tenant-lease.js,
 * durable-store.js and epoch-copies.js, plus LeaseKeeper, ManualClock, openLeaseStore and
 * ERROR_CODES.
 */
const native = require('./lib/native');
const errors = require('./lib/errors');
const ids = require('./lib/ids');
const { MIN_LEASE_TTL_MS, MAX_LEASE_TTL_MS, assertLeaseTtl, SqliteLeaseStore, openLeaseStore } = require('./lib/lease-store');
const { systemMonotonicClock, TenantLease } = require('./lib/tenant-lease');
const { LeaseKeeper } = require('./lib/keeper');
const { DirectoryDurableStore, openDurableStore } = require('./lib/durable-store');
const { EpochCopies } = require('./lib/epoch-copies');

module.exports = {
    ...errors,
    ...ids,
    MIN_LEASE_TTL_MS,
    MAX_LEASE_TTL_MS,
    assertLeaseTtl,
    SqliteLeaseStore,
    openLeaseStore,
    systemMonotonicClock,
    TenantLease,
    LeaseKeeper,
    DirectoryDurableStore,
    openDurableStore,
    EpochCopies,
    ManualClock: native.ManualClock,
    /** The stable error codes, in the core's order. */
    ERROR_CODES: Object.freeze(native.errorCodes()),
};
