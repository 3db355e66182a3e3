'use strict';
/**
 * @gotry/tenant-state: the per-tenant state layer (tenant ids, the lease store, the tenant
 * lease, durable stores, epoch-scoped copies and the tenant router) on the shared Rust core,
 * with the exports of gotry's JavaScript modules errors.js, ids.js, lease-store.js,
 * tenant-lease.js, durable-store.js, epoch-copies.js and tenant-router.js, plus LeaseKeeper,
 * ManualClock, openLeaseStore, betterSqlite3Snapshot, ERROR_CODES,
 * and the core's metrics (metrics, METRICS_CONTENT_TYPE, registerPromClient).
 */
const { ManualClock, errorCodes, version } = require('./lib/native');
const { systemMonotonicClock, TenantLease } = require('./lib/tenant-lease');
const { LeaseKeeper } = require('./lib/keeper');
const { DirectoryDurableStore, openDurableStore } = require('./lib/durable-store');
const { EpochCopies } = require('./lib/epoch-copies');
const { betterSqlite3Snapshot } = require('./lib/host-functions');
const { TenantRouter } = require('./lib/tenant-router');
const { metrics, METRICS_CONTENT_TYPE, registerPromClient } = require('./lib/metrics');

/** The stable error codes, in the core's order. */
const ERROR_CODES = Object.freeze(errorCodes());

// Written in the shape Node reads named exports from (spreads of `require` and plain names),
// so that index.mjs can re-export them without listing them again. A module that also exports
// what is internal to this package is picked from by name.
module.exports = {
    ...require('./lib/errors'),
    ...require('./lib/ids'),
    ...require('./lib/lease-store'),
    systemMonotonicClock,
    TenantLease,
    LeaseKeeper,
    DirectoryDurableStore,
    openDurableStore,
    EpochCopies,
    betterSqlite3Snapshot,
    TenantRouter,
    ManualClock,
    ERROR_CODES,
    version,
    metrics,
    METRICS_CONTENT_TYPE,
    registerPromClient,
};
