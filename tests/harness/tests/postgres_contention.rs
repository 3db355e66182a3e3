//! Four OS processes hammer one set of PostgreSQL tables; the log must then prove every
//! lease rule (and the lease audit pass), as with SQLite and MySQL.
//!
//! `GOTRY_SKIP_POSTGRES=1` marks it ignored; otherwise a missing server fails it.

mod common;

use gotry_tenant_state::PostgresLeaseStore;
use gotry_test_support::postgres::{self as server, ScratchTables};

const WORKERS: usize = 4;

#[test]
#[cfg_attr(
    gotry_skip_postgres,
    ignore = "GOTRY_SKIP_POSTGRES=1: needs a PostgreSQL server"
)]
fn four_processes_share_one_postgres_table_without_breaking_a_rule() {
    let url = server::server_url();
    let prefix = server::fresh_prefix();
    let store_url = server::with_option(&url, "prefix", &prefix);
    // Dropped after the store, as declared before it.
    let mut scratch = ScratchTables::new(&url);
    scratch.add(&prefix);
    // Created once up front, so the workers race on leases rather than on the schema.
    let store = PostgresLeaseStore::open_url(&store_url).unwrap_or_else(|e| server::no_server(&url, &e));
    let dir = tempfile::tempdir().unwrap();
    let acks = common::run_workers(&store_url, dir.path(), WORKERS);
    common::assert_rules_held(&store, &acks, WORKERS, &format!("postgres tables={prefix}*"));
}
