//! Six OS processes hammer one SQLite file; the log must then prove every lease rule.

mod common;

use gotry_tenant_state::{LeaseStore, SqliteLeaseStore};

#[test]
fn six_processes_share_one_file_without_breaking_a_rule() {
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("leases.db");
    // Created once up front, so the workers race on leases rather than on the schema.
    SqliteLeaseStore::open(&store_path).unwrap().close().unwrap();
    let acks = common::run_workers(store_path.to_str().unwrap(), dir.path(), 6);
    let store = SqliteLeaseStore::open(&store_path).unwrap();
    common::assert_rules_held(&store, &acks, 6, "sqlite");
}
