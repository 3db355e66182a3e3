//! `gotry_tenant_state._native`: the Python face of the tenant-state core.
//!
//! A translation layer only: Python objects become the core's arguments (with the checks
//! that only Python needs, see `args`), core failures become the package's exceptions (in
//! one place, `errors`), and every call that reaches a store runs without the interpreter
//! lock. Python callables that the core calls back (clocks aside) go through `callbacks`.
//! The package `gotry_tenant_state` re-exports all of it next to the exception classes.

mod args;
mod callbacks;
mod clocks;
mod copies;
mod durable;
mod errors;
mod ids;
mod keeper;
mod lease;
mod router;
mod store;
mod values;

use pyo3::prelude::*;

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "ERROR_CODES",
        pyo3::types::PyTuple::new(m.py(), errors::error_codes())?,
    )?;
    // Private: the core's message template of each code, which `_errors.py` fills for an
    // exception a host constructs itself.
    m.add("_ERROR_TYPES", errors::error_types(m.py())?)?;
    m.add("MIN_LEASE_TTL_MS", gotry_tenant_state::MIN_LEASE_TTL_MS)?;
    m.add("MAX_LEASE_TTL_MS", gotry_tenant_state::MAX_LEASE_TTL_MS)?;
    // Private: the wait of `_snapshot.py`, the core's rule for every snapshot function.
    m.add(
        "_SNAPSHOT_LOCK_WAIT_S",
        gotry_tenant_state::epoch_copies::SNAPSHOT_LOCK_WAIT.as_secs_f64(),
    )?;
    m.add_function(wrap_pyfunction!(assert_lease_ttl, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add("METRICS_CONTENT_TYPE", gotry_tenant_state::metrics::CONTENT_TYPE)?;
    m.add_function(wrap_pyfunction!(metrics, m)?)?;
    m.add_function(wrap_pyfunction!(ids::assert_organization_id, m)?)?;
    m.add_function(wrap_pyfunction!(ids::assert_ledger_tenant_id, m)?)?;
    m.add_function(wrap_pyfunction!(ids::assert_prompt_cache_partition, m)?)?;
    m.add_function(wrap_pyfunction!(ids::derive_ledger_tenant_id, m)?)?;
    m.add_function(wrap_pyfunction!(ids::derive_prompt_cache_partition, m)?)?;
    m.add_function(wrap_pyfunction!(ids::lease_key_for, m)?)?;
    m.add_function(wrap_pyfunction!(ids::tenant_root_for, m)?)?;
    m.add_function(wrap_pyfunction!(store::open_lease_store, m)?)?;
    m.add_function(wrap_pyfunction!(durable::open_durable_store, m)?)?;
    m.add_class::<ids::PyOrganizationKey>()?;
    m.add_class::<clocks::PyManualClock>()?;
    m.add_class::<values::PyLeaseRecord>()?;
    m.add_class::<values::PyLeaseGrant>()?;
    m.add_class::<values::PyHistoryEntry>()?;
    m.add_class::<store::PyLeaseStore>()?;
    m.add_class::<store::PySqliteLeaseStore>()?;
    m.add_class::<lease::PyTenantLease>()?;
    m.add_class::<keeper::PyLeaseKeeper>()?;
    m.add_class::<keeper::PyKeeperEvent>()?;
    m.add_class::<keeper::PyTickReport>()?;
    m.add_class::<keeper::PyShutdownReport>()?;
    m.add_class::<durable::PyDurableStore>()?;
    m.add_class::<durable::PyDirectoryDurableStore>()?;
    m.add_class::<copies::PyEpochCopies>()?;
    m.add_class::<copies::PyCopyId>()?;
    m.add_class::<copies::PySkippedCopy>()?;
    m.add_class::<copies::PyWrittenCopy>()?;
    m.add_class::<copies::PyCopyListing>()?;
    m.add_class::<copies::PyRestoreReport>()?;
    m.add_class::<copies::PyGcReport>()?;
    m.add_class::<router::PyTenantRouter>()?;
    m.add_class::<router::PyTenantHandle>()?;
    m.add_class::<router::PyTenantStatus>()?;
    m.add_class::<router::PyRouterEvent>()?;
    m.add_class::<router::PyCloseReport>()?;
    m.add_class::<router::PyRouterTickReport>()?;
    let atexit = m.py().import("atexit")?;
    // `atexit` runs its hooks last in, first out: routers (whose keepers are their own) close
    // before the host's own keepers shut down.
    let keepers_at_exit = wrap_pyfunction!(keeper::_shutdown_keepers_at_exit, m)?;
    atexit.call_method1("register", (keepers_at_exit,))?;
    let routers_at_exit = wrap_pyfunction!(router::_close_routers_at_exit, m)?;
    atexit.call_method1("register", (routers_at_exit,))?;
    Ok(())
}

/// The version of the core this module was built from (the workspace's one version): which
/// build is loaded, whatever the installed distribution's metadata says.
#[pyfunction]
fn version() -> &'static str {
    gotry_tenant_state::VERSION
}

/// Every metric family of this process in the Prometheus text format 0.0.4. It only reads
/// counters, so it keeps the interpreter lock.
#[pyfunction]
fn metrics() -> String {
    gotry_tenant_state::metrics::encode()
}

/// Returns the TTL when it is an int of milliseconds within the store's bounds.
#[pyfunction]
fn assert_lease_ttl(ttl_ms: &Bound<'_, PyAny>) -> PyResult<i64> {
    let ttl_ms = args::integer("ttl_ms", ttl_ms)?;
    Ok(gotry_tenant_state::assert_lease_ttl(ttl_ms).map_err(errors::CoreError)?)
}
