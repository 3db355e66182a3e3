//! Four OS processes hammer one set of MySQL/MariaDB tables; the log must then prove every
//! lease rule. The same check as the SQLite run, on the store that replicas on many hosts
//! share, where the row lock and the server's clock do what SQLite's file lock and the
//! host's clock did.
//!
//! `GOTRY_SKIP_MYSQL=1` marks it ignored; otherwise a missing server fails it.

mod common;

use gotry_tenant_state::MysqlLeaseStore;
use gotry_test_support::mysql::{self as server, ScratchTables};

const WORKERS: usize = 4;

#[test]
#[cfg_attr(gotry_skip_mysql, ignore = "GOTRY_SKIP_MYSQL=1: needs a MySQL/MariaDB server")]
fn four_processes_share_one_mysql_table_without_breaking_a_rule() {
    let url = server::server_url();
    let prefix = server::fresh_prefix();
    let store_url = server::with_option(&url, "prefix", &prefix);
    // Dropped after the store, as declared before it.
    let mut scratch = ScratchTables::new(&url);
    // Created once up front, so the workers race on leases rather than on the schema.
    let store = MysqlLeaseStore::open_url(&store_url).unwrap_or_else(|e| server::no_server(&url, &e));
    let (leases, log) = store.table_names();
    scratch.add(leases, log);
    let dir = tempfile::tempdir().unwrap();
    let acks = common::run_workers(&store_url, dir.path(), WORKERS);
    common::assert_rules_held(&store, &acks, WORKERS, &format!("mysql tables={prefix}*"));
}
