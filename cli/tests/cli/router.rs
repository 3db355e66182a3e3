//! `router status` over a real SQLite lease store and a directory durable store, both filled
//! through the core (and one release through the CLI itself), on the store's real clock.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gotry_tenant_state::{
    tenant_root_for, DirectoryDurableStore, DurableStore, EpochCopies, LeaseOptions, LeaseStore,
    SqliteLeaseStore, SystemMonotonicClock, TenantLease,
};
use serde_json::{json, Value};

use crate::{strings, Sandbox};

const TTL_MS: i64 = 600_000;

/// Held by replica-a at epoch 1, which wrote seq 1 and seq 2 of epoch 1.
const CURRENT: &str = "acme/t-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// replica-a wrote epoch 1 seq 1 and released; replica-b holds epoch 2 and has written no
/// copy yet, but a writer of epoch 2 died mid-copy (no manifest).
const BEHIND: &str = "acme/t-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
/// replica-f wrote a copy, marked its own epoch forgotten, and released.
const FORGOTTEN: &str = "acme/t-ffffffffffffffffffffffffffffffff";
/// replica-c acquired and released through `gotry-tenant lease release`; no copy.
const RELEASED: &str = "beta/t-cccccccccccccccccccccccccccccccc";
/// replica-d acquired for the shortest TTL and stopped renewing; no copy.
const EXPIRED: &str = "beta/t-dddddddddddddddddddddddddddddddd";

struct Fixture {
    sandbox: Sandbox,
    leases: Arc<dyn LeaseStore>,
    durable: PathBuf,
}

impl Fixture {
    /// An empty lease store file and an empty durable store folder.
    fn empty() -> Fixture {
        let sandbox = Sandbox::new();
        let leases: Arc<dyn LeaseStore> =
            Arc::new(SqliteLeaseStore::open(sandbox.path("leases.db")).unwrap());
        let durable = sandbox.path("copies");
        drop(DirectoryDurableStore::open(&durable).unwrap());
        Fixture {
            sandbox,
            leases,
            durable,
        }
    }

    fn new() -> Fixture {
        let fixture = Fixture::empty();
        let copies = fixture.copies();

        let a = fixture.holder(CURRENT, "replica-a");
        fixture.write_copy(&copies, &a, "replica-a");
        fixture.write_copy(&copies, &a, "replica-a");

        let a = fixture.holder(BEHIND, "replica-a");
        fixture.write_copy(&copies, &a, "replica-a");
        a.release().unwrap();
        let b = fixture.holder(BEHIND, "replica-b");
        assert_eq!(b.epoch(), 2);
        // The first object of a copy whose writer died before its manifest.
        let store = DirectoryDurableStore::open(&fixture.durable).unwrap();
        store
            .put_new(
                &format!(
                    "orgs/acme/tenants/t-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/epochs/{:020}/{:020}/files/000000",
                    2, 1
                ),
                b"half a copy",
            )
            .unwrap();

        let f = fixture.holder(FORGOTTEN, "replica-f");
        fixture.write_copy(&copies, &f, "replica-f");
        fixture
            .leases
            .mark_forgotten(FORGOTTEN, "replica-f", f.epoch())
            .unwrap();
        f.release().unwrap();

        let c = fixture.leases.acquire(RELEASED, "replica-c", TTL_MS).unwrap();
        let epoch = c.record.epoch.to_string();
        fixture
            .sandbox
            .run([
                "lease",
                "release",
                RELEASED,
                "--owner",
                "replica-c",
                "--epoch",
                &epoch,
                "--store",
                "leases.db",
            ])
            .ok();

        fixture.leases.acquire(EXPIRED, "replica-d", 100).unwrap();
        std::thread::sleep(Duration::from_millis(250));

        fixture
    }

    fn holder(&self, key: &str, replica: &str) -> TenantLease {
        TenantLease::acquire(LeaseOptions {
            key: key.to_owned(),
            replica_id: replica.to_owned(),
            store: self.leases.clone(),
            ttl_ms: TTL_MS,
            margin_ms: 1_000,
            clock: Arc::new(SystemMonotonicClock),
        })
        .unwrap()
    }

    fn copies(&self) -> EpochCopies {
        EpochCopies::new(Arc::new(DirectoryDurableStore::open(&self.durable).unwrap()))
    }

    fn write_copy(&self, copies: &EpochCopies, lease: &TenantLease, replica: &str) {
        let (org, tenant) = lease.key().split_once('/').unwrap();
        let root = tenant_root_for(&self.sandbox.path(replica), org, tenant).unwrap();
        write_ledger(&root);
        copies.write_copy(lease, &root).unwrap();
    }

    /// Runs `gotry-tenant router status <args> --store leases.db --durable copies`.
    fn status(&self, args: &[&str]) -> crate::Run {
        let mut all = vec!["router", "status"];
        all.extend_from_slice(args);
        all.extend(["--store", "leases.db", "--durable", "copies"]);
        self.sandbox.run(all)
    }
}

fn write_ledger(root: &Path) {
    let path = root.join("gotry-state/gotry-state.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS ledger (entry TEXT NOT NULL); INSERT INTO ledger VALUES ('x');",
    )
    .unwrap();
}

/// The row of `key` in a `--json` report.
fn row<'a>(report: &'a Value, key: &str) -> &'a Value {
    report["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["key"] == key)
        .unwrap_or_else(|| panic!("no row for {key}: {report:#}"))
}

#[test]
fn json_shows_each_lease_with_its_state_and_newest_copy() {
    let fixture = Fixture::new();
    let report = fixture.status(&["--json"]).json();
    assert_eq!(report["organization"], Value::Null);
    assert!(report["nowMs"].as_i64().unwrap() > 0);
    assert!(
        report["durable"].as_str().unwrap().ends_with("/copies"),
        "{report:#}"
    );
    let keys = strings(&report["tenants"], "key");
    assert_eq!(keys, [CURRENT, BEHIND, FORGOTTEN, RELEASED, EXPIRED]);

    let current = row(&report, CURRENT);
    assert_eq!(current["state"], "held");
    assert_eq!(current["held"], true);
    assert_eq!(current["owner"], "replica-a");
    assert_eq!(current["epoch"], 1);
    let left = current["expiresInMs"].as_i64().unwrap();
    assert!(left > 0 && left <= TTL_MS, "{current}");
    assert_eq!(
        current["newestCopy"],
        json!({ "epoch": 1, "seq": 2, "currentEpoch": true, "forgotten": false })
    );
    assert_eq!(
        (current["copies"].clone(), current["completeCopies"].clone()),
        (json!(2), json!(2))
    );

    let behind = row(&report, BEHIND);
    assert_eq!(behind["state"], "held");
    assert_eq!(behind["owner"], "replica-b");
    assert_eq!(behind["epoch"], 2);
    assert_eq!(
        behind["newestCopy"],
        json!({ "epoch": 1, "seq": 1, "currentEpoch": false, "forgotten": false })
    );
    assert_eq!(
        (behind["copies"].clone(), behind["completeCopies"].clone()),
        (json!(2), json!(1))
    );

    let forgotten = row(&report, FORGOTTEN);
    assert_eq!(forgotten["state"], "forgotten");
    assert_eq!(forgotten["held"], false);
    assert_eq!(forgotten["forgottenAtEpoch"], 1);
    assert_eq!(
        forgotten["newestCopy"],
        json!({ "epoch": 1, "seq": 1, "currentEpoch": true, "forgotten": true })
    );

    let released = row(&report, RELEASED);
    assert_eq!(released["state"], "released");
    assert_eq!(released["owner"], "replica-c");
    assert!(released["expiresInMs"].as_i64().unwrap() <= 0, "{released}");
    assert_eq!(released["newestCopy"], Value::Null);
    assert_eq!(released["copies"], 0);

    let expired = row(&report, EXPIRED);
    assert_eq!(expired["state"], "expired");
    assert_eq!(expired["held"], false);
    assert!(expired["expiresInMs"].as_i64().unwrap() < 0, "{expired}");
    assert_eq!(expired["newestCopy"], Value::Null);
}

/// Every field the README documents is in every row, and nothing else.
#[test]
fn json_field_names_are_the_documented_ones() {
    let fixture = Fixture::new();
    let report = fixture.status(&["--json"]).json();
    let mut top: Vec<&String> = report.as_object().unwrap().keys().collect();
    top.sort();
    assert_eq!(top, ["durable", "nowMs", "organization", "tenants"]);
    for tenant in report["tenants"].as_array().unwrap() {
        let mut fields: Vec<&String> = tenant.as_object().unwrap().keys().collect();
        fields.sort();
        assert_eq!(
            fields,
            [
                "completeCopies",
                "copies",
                "epoch",
                "expiresInMs",
                "forgottenAtEpoch",
                "held",
                "key",
                "leaseUntilMs",
                "newestCopy",
                "owner",
                "state",
            ],
            "{tenant}"
        );
    }
}

#[test]
fn text_is_a_table_with_one_row_per_lease() {
    let fixture = Fixture::new();
    let run = fixture.status(&[]);
    let text = run.ok();
    let lines: Vec<&str> = text.lines().collect();
    let headers: Vec<&str> = lines[0]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        headers,
        [
            "KEY",
            "STATE",
            "EPOCH",
            "OWNER",
            "EXPIRY",
            "NEWEST COPY",
            "CURRENT",
            "COPIES"
        ],
        "{text}"
    );
    let line = |key: &str| -> Vec<&str> {
        let line = lines
            .iter()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no line for {key}: {text}"));
        // Columns are two spaces apart at least.
        line.split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect()
    };
    let current = line(CURRENT);
    assert_eq!(current[1..4], ["held by replica-a", "1", "replica-a"], "{text}");
    assert!(current[4].starts_with("expires in "), "{text}");
    assert_eq!(current[5..], ["epoch 1 seq 2", "yes", "2"], "{text}");
    let behind = line(BEHIND);
    assert_eq!(behind[1..4], ["held by replica-b", "2", "replica-b"], "{text}");
    assert_eq!(behind[5..], ["epoch 1 seq 1", "no", "2 (1 incomplete)"], "{text}");
    let forgotten = line(FORGOTTEN);
    assert_eq!(forgotten[1], "forgotten", "{text}");
    assert_eq!(
        forgotten[5..],
        ["epoch 1 seq 1 (forgotten)", "yes", "1"],
        "{text}"
    );
    let released = line(RELEASED);
    assert_eq!(released[1..4], ["released", "1", "replica-c"], "{text}");
    assert!(released[4].starts_with("expired "), "{text}");
    assert_eq!(released[5..], ["none", "-", "0"], "{text}");
    let expired = line(EXPIRED);
    assert_eq!(expired[1], "expired", "{text}");
    assert!(
        text.contains("\n5 leases (2 held, 1 of them without a copy of their own epoch yet); copies in "),
        "{text}"
    );
}

#[test]
fn org_keeps_one_organization_and_is_checked() {
    let fixture = Fixture::new();
    let report = fixture.status(&["--org", "beta", "--json"]).json();
    assert_eq!(report["organization"], "beta");
    let keys = strings(&report["tenants"], "key");
    assert_eq!(keys, [RELEASED, EXPIRED]);
    let text = fixture.status(&["--org", "beta"]);
    assert!(
        text.ok().contains("\n2 leases of beta (0 held, 0 of them"),
        "{text:?}"
    );
    // `acm` is a prefix of `acme` but not its organization.
    let none = fixture.status(&["--org", "acm"]);
    assert_eq!(none.ok(), "no leases of acm in the lease store\n");
    let bad = fixture.status(&["--org", "Acme/"]);
    bad.failed(5, "GOTRY_TENANT_ID_INVALID");
}

#[test]
fn an_empty_store_has_no_rows() {
    let fixture = Fixture::empty();
    assert_eq!(fixture.status(&[]).ok(), "no leases in the lease store\n");
    let report = fixture.status(&["--json"]).json();
    assert_eq!(report["tenants"], json!([]));
}

/// Neither store is created by a look at it: a mistyped path is an error.
#[test]
fn missing_stores_are_errors_and_not_created() {
    let fixture = Fixture::empty();
    let run = fixture
        .sandbox
        .run(["router", "status", "--store", "nope.db", "--durable", "copies"]);
    let line = run.failed(7, "ENOENT");
    assert!(line.contains("no lease store at nope.db"), "{line}");
    assert!(!fixture.sandbox.path("nope.db").exists());
    let run = fixture.sandbox.run([
        "router",
        "status",
        "--store",
        "leases.db",
        "--durable",
        "no-copies",
        "--json",
    ]);
    let error = run.failed_json(7, "ENOENT");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("no durable store at no-copies"),
        "{error}"
    );
    assert!(!fixture.sandbox.path("no-copies").exists());
}

#[test]
fn metrics_prints_the_stores_view_as_prometheus_text() {
    let fixture = Fixture::new();
    let run = fixture.status(&["--metrics"]);
    let text = run.ok();
    assert_eq!(
        text,
        "# HELP gotry_tenant_store_leases Leases in the lease store, by state on the store's clock.\n\
         # TYPE gotry_tenant_store_leases gauge\n\
         gotry_tenant_store_leases{state=\"held\"} 2\n\
         gotry_tenant_store_leases{state=\"expired\"} 1\n\
         gotry_tenant_store_leases{state=\"released\"} 1\n\
         gotry_tenant_store_leases{state=\"forgotten\"} 1\n\
         # HELP gotry_tenant_store_leases_behind Held leases whose holder has written no complete copy of its own epoch yet.\n\
         # TYPE gotry_tenant_store_leases_behind gauge\n\
         gotry_tenant_store_leases_behind 1\n\
         # HELP gotry_tenant_store_copies Copies in the durable store of the leases listed, complete (manifest written) or not.\n\
         # TYPE gotry_tenant_store_copies gauge\n\
         gotry_tenant_store_copies{complete=\"true\"} 4\n\
         gotry_tenant_store_copies{complete=\"false\"} 1\n"
    );
    // Per organization, as the table is.
    let beta = fixture.status(&["--metrics", "--org", "beta"]);
    assert!(
        beta.ok()
            .contains("gotry_tenant_store_leases{state=\"held\"} 0\n"),
        "{beta:?}"
    );
    // One output at a time: the text and JSON do not mix.
    let both = fixture.status(&["--metrics", "--json"]);
    assert_ne!(both.status, 0, "{both:?}");
    assert!(both.stdout.is_empty(), "{both:?}");
}
