//! `copies list|verify|restore` over a directory durable store filled through the core.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use gotry_tenant_state::{
    tenant_root_for, DirectoryDurableStore, EpochCopies, LeaseOptions, LeaseStore, ManualClock,
    SqliteLeaseStore, TenantLease,
};
use serde_json::json;

use crate::Sandbox;

const ORG: &str = "acme";
const TENANT: &str = "t-0123456789abcdef0123456789abcdef";
const KEY: &str = "acme/t-0123456789abcdef0123456789abcdef";
const TTL_MS: i64 = 10_000;

/// A lease store on a manual clock and a directory durable store holding two copies of
/// replica-a's tenant root (epoch 1): seq 1 with the ledger `[first]`, seq 2 with
/// `[first, second]`.
struct Fixture {
    sandbox: Sandbox,
    wall: Arc<ManualClock>,
    leases: Arc<dyn LeaseStore>,
    durable: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let sandbox = Sandbox::new();
        let wall = Arc::new(ManualClock::new(1_000_000));
        let leases: Arc<dyn LeaseStore> = Arc::new(
            SqliteLeaseStore::open(sandbox.path("leases.db"))
                .unwrap()
                .with_clock(wall.clone()),
        );
        let durable = sandbox.path("copies");
        let fixture = Fixture {
            sandbox,
            wall,
            leases,
            durable,
        };
        let a = fixture.holder("replica-a");
        let root = tenant_root_for(&fixture.sandbox.path("replica-a"), ORG, TENANT).unwrap();
        let copies = fixture.copies();
        write_ledger(&root, &["first"]);
        copies.write_copy(&a, &root).unwrap();
        write_ledger(&root, &["first", "second"]);
        copies.write_copy(&a, &root).unwrap();
        fixture
    }

    fn holder(&self, replica: &str) -> TenantLease {
        TenantLease::acquire(LeaseOptions {
            key: KEY.to_owned(),
            replica_id: replica.to_owned(),
            store: self.leases.clone(),
            ttl_ms: TTL_MS,
            margin_ms: 1_000,
            clock: Arc::new(ManualClock::new(0)),
        })
        .unwrap()
    }

    fn copies(&self) -> EpochCopies {
        EpochCopies::new(Arc::new(DirectoryDurableStore::open(&self.durable).unwrap()))
    }

    /// Runs `gotry-tenant copies <args> --durable <the fixture's folder>`.
    fn run(&self, args: &[&str]) -> crate::Run {
        let mut all: Vec<&str> = vec!["copies"];
        all.extend_from_slice(args);
        all.push("--durable");
        all.push(self.durable.to_str().unwrap());
        self.sandbox.run(all)
    }

    /// Damages the ledger (the copy's only file) of epoch 1's copy `seq` below the store's
    /// create-only interface, as a disk fault would. A ledger this small rides inline in the
    /// manifest (base64): one character of it changes to another of the alphabet, which
    /// changes the bytes it stands for, not the manifest's form.
    fn flip_a_byte(&self, seq: u64) {
        let path = self.durable.join(format!(
            "orgs/{ORG}/tenants/{TENANT}/epochs/{:020}/{seq:020}.json",
            1
        ));
        let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let inline = manifest["files"][0]["base"]["inline"]
            .as_str()
            .expect("a base that rides inline")
            .to_owned();
        let middle = inline.len() / 2;
        let swapped = if &inline[middle..=middle] == "A" { "B" } else { "A" };
        let damaged = format!("{}{swapped}{}", &inline[..middle], &inline[middle + 1..]);
        manifest["files"][0]["base"]["inline"] = json!(damaged);
        std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    }

    /// Makes the manifest of epoch 1's copy `seq` name its ledger twice, below the store's
    /// interface: the form still parses and every checksum still holds, so only the rule that
    /// a restore must be able to lay the paths out tells the copy apart.
    fn name_a_path_twice(&self, seq: u64) {
        let path = self.durable.join(format!(
            "orgs/{ORG}/tenants/{TENANT}/epochs/{:020}/{seq:020}.json",
            1
        ));
        let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let files = manifest["files"].as_array_mut().unwrap();
        let again = files[0].clone();
        files.push(again);
        std::fs::write(&path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    }
}

fn write_ledger(root: &Path, entries: &[&str]) {
    let path = root.join("gotry-state/gotry-state.db");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch("CREATE TABLE IF NOT EXISTS ledger (entry TEXT NOT NULL); DELETE FROM ledger;")
        .unwrap();
    for entry in entries {
        db.execute("INSERT INTO ledger (entry) VALUES (?1)", [entry])
            .unwrap();
    }
}

fn read_ledger(root: &Path) -> Vec<String> {
    let db = rusqlite::Connection::open(root.join("gotry-state/gotry-state.db")).unwrap();
    let mut query = db.prepare("SELECT entry FROM ledger ORDER BY rowid").unwrap();
    let entries = query.query_map([], |row| row.get(0)).unwrap();
    entries.map(Result::unwrap).collect()
}

#[test]
fn list_in_json_names_each_copy() {
    let fixture = Fixture::new();
    let listed = fixture.run(&["list", KEY, "--json"]).json();
    assert_eq!(listed["key"], KEY);
    let copies = listed["copies"].as_array().unwrap();
    let ids: Vec<(i64, u64, bool)> = copies
        .iter()
        .map(|c| {
            (
                c["epoch"].as_i64().unwrap(),
                c["seq"].as_u64().unwrap(),
                c["complete"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(ids, [(1, 1, true), (1, 2, true)]);
    for copy in copies {
        // The manifest alone: a ledger this small rides inline in it.
        assert_eq!(copy["objects"], 1, "{copy}");
        assert!(copy["bytes"].as_u64().unwrap() > 0, "{copy}");
        // Each of the two holds its ledger whole (a base), referencing nothing earlier.
        assert_eq!(
            (&copy["objects_reused"], &copy["bytes_reused"]),
            (&json!(0), &json!(0)),
            "{copy}"
        );
    }
    let text = fixture.run(&["list", KEY]);
    let text = text.ok();
    assert!(
        text.starts_with("EPOCH  SEQ  COMPLETE  OBJECTS  BYTES  REUSED BYTES"),
        "{text}"
    );
    assert!(
        text.contains("2 copies of acme/t-0123456789abcdef0123456789abcdef in "),
        "{text}"
    );
    assert!(text.ends_with(", 2 complete\n"), "{text}");

    let other = "acme/t-fedcba9876543210fedcba9876543210";
    let none = fixture.run(&["list", other, "--json"]).json();
    assert_eq!(none["copies"], json!([]));
}

#[test]
fn verify_gives_each_copy_its_verdict() {
    let fixture = Fixture::new();
    let clean = fixture.run(&["verify", KEY, "--json"]).json();
    assert_eq!(
        clean["copies"],
        json!([
            { "epoch": 1, "seq": 1, "ok": true, "reason": null },
            { "epoch": 1, "seq": 2, "ok": true, "reason": null },
        ])
    );

    fixture.flip_a_byte(2);
    let flipped = fixture.run(&["verify", KEY, "--json"]).json();
    assert_eq!(
        flipped["copies"],
        json!([
            { "epoch": 1, "seq": 1, "ok": true, "reason": null },
            { "epoch": 1, "seq": 2, "ok": false, "reason": "checksum" },
        ])
    );
    let text = fixture.run(&["verify", KEY]);
    let text = text.ok();
    assert!(
        text.contains("checksum: a file is missing, or its size or SHA-256 differs"),
        "{text}"
    );
    assert!(
        text.contains("2 copies of acme/t-0123456789abcdef0123456789abcdef in "),
        "{text}"
    );
    assert!(text.contains(" checked, 1 verifies\n"), "{text}");

    // One copy asked for by number: a failure of its own when it does not verify.
    let good = fixture
        .run(&["verify", KEY, "--epoch", "1", "--seq", "1", "--json"])
        .json();
    assert_eq!(
        good["copies"],
        json!([{ "epoch": 1, "seq": 1, "ok": true, "reason": null }])
    );
    let bad = fixture
        .run(&["verify", KEY, "--epoch", "1", "--seq", "2", "--json"])
        .failed_json(8, "ERR_COPY_INVALID");
    assert_eq!(bad["kind"], "unverified");
    assert_eq!(
        bad["skipped"],
        json!([{ "epoch": 1, "seq": 2, "reason": "checksum" }])
    );
    // A copy that is not there is a mistyped request, not a broken copy.
    fixture
        .run(&["verify", KEY, "--epoch", "1", "--seq", "9"])
        .failed(5, "ERR_NO_SUCH_COPY");
}

#[test]
fn verify_passes_over_a_manifest_that_names_one_path_twice() {
    let fixture = Fixture::new();
    fixture.name_a_path_twice(2);
    // Every copy gets a verdict and the command succeeds (status 0), whatever the verdicts.
    let all = fixture.run(&["verify", KEY, "--json"]);
    let all: serde_json::Value = serde_json::from_str(all.ok()).unwrap();
    assert_eq!(
        all["copies"],
        json!([
            { "epoch": 1, "seq": 1, "ok": true, "reason": null },
            { "epoch": 1, "seq": 2, "ok": false, "reason": "manifest" },
        ])
    );
    let text = fixture.run(&["verify", KEY]);
    let text = text.ok();
    assert!(text.contains("manifest: the manifest is missing"), "{text}");
    assert!(text.contains("one twice"), "{text}");
    // Asked for by number, it is the one copy asked for that does not verify: status 8.
    let one = fixture
        .run(&["verify", KEY, "--epoch", "1", "--seq", "2", "--json"])
        .failed_json(8, "ERR_COPY_INVALID");
    assert_eq!(
        one["skipped"],
        json!([{ "epoch": 1, "seq": 2, "reason": "manifest" }])
    );
}

#[test]
fn restore_takes_the_newest_copy_that_verifies_into_a_fresh_folder() {
    let fixture = Fixture::new();
    fixture.flip_a_byte(2);
    let to = fixture.sandbox.path("look/acme");
    let restored = fixture
        .run(&["restore", KEY, "--to", "look/acme", "--json"])
        .json();
    assert_eq!(restored["restored"], json!({ "epoch": 1, "seq": 1 }));
    assert_eq!(
        restored["skipped"],
        json!([{ "epoch": 1, "seq": 2, "reason": "checksum" }])
    );
    assert_eq!(restored["files"], 1);
    assert_eq!(restored["forgottenAtEpoch"], 0);
    assert_eq!(restored["to"], to.to_str().unwrap());
    assert_eq!(read_ledger(&to), ["first"]);

    // A folder that holds anything is replaced only when asked to.
    let again = fixture.run(&["restore", KEY, "--to", "look/acme"]);
    let line = again.failed(5, "ENOTEMPTY");
    assert!(line.contains("--force"), "{line}");
    let text = fixture.run(&["restore", KEY, "--to", "look/acme", "--force"]);
    let text = text.ok();
    assert!(
        text.starts_with(
            "restored acme/t-0123456789abcdef0123456789abcdef from the copy of epoch 1 seq 1 into "
        ),
        "{text}"
    );
    assert!(text.contains("passed over, newest first:"), "{text}");
    assert!(text.contains("checksum: a file is missing"), "{text}");
    assert_eq!(read_ledger(&to), ["first"]);
}

#[test]
fn restore_leaves_out_the_epochs_the_lease_store_marks_forgotten() {
    let fixture = Fixture::new();
    let store = fixture.sandbox.path("leases.db");
    let store = store.to_str().unwrap();
    // Nothing is forgotten yet: the newest copy is taken.
    let before = fixture
        .run(&["restore", KEY, "--to", "before", "--store", store, "--json"])
        .json();
    assert_eq!(before["restored"], json!({ "epoch": 1, "seq": 2 }));
    assert_eq!(read_ledger(&fixture.sandbox.path("before")), ["first", "second"]);

    fixture.wall.advance(TTL_MS + 1).unwrap();
    // replica-b (epoch 2) marks every copy up to its own epoch dead.
    let b = fixture.holder("replica-b");
    assert_eq!(b.mark_forgotten().unwrap().forgotten_at_epoch, 2);
    let after = fixture
        .run(&["restore", KEY, "--to", "after", "--store", store, "--json"])
        .json();
    assert_eq!(after["forgottenAtEpoch"], 2);
    assert_eq!(after["restored"], json!(null));
    assert_eq!(after["skipped"], json!([]));
    let unfloored = fixture
        .run(&["restore", KEY, "--to", "unfloored", "--json"])
        .json();
    assert_eq!(unfloored["restored"], json!({ "epoch": 1, "seq": 2 }));
    // --below-epoch keeps only what the holder of that epoch could restore from.
    let below = fixture
        .run(&["restore", KEY, "--to", "below", "--below-epoch", "1", "--json"])
        .json();
    assert_eq!(below["restored"], json!(null));
}

#[test]
fn restore_with_no_copy_that_verifies_fails_with_every_skipped_copy() {
    let fixture = Fixture::new();
    fixture.flip_a_byte(1);
    fixture.flip_a_byte(2);
    let error = fixture
        .run(&["restore", KEY, "--to", "look", "--json"])
        .failed_json(8, "GOTRY_TENANT_RESTORE_INVALID");
    assert_eq!(error["kind"], "unverified");
    assert_eq!(
        error["skipped"],
        json!([
            { "epoch": 1, "seq": 2, "reason": "checksum" },
            { "epoch": 1, "seq": 1, "reason": "checksum" },
        ])
    );
    fixture
        .run(&["restore", KEY, "--to", "look"])
        .failed(8, "GOTRY_TENANT_RESTORE_INVALID");
    assert!(!fixture.sandbox.path("look").exists(), "nothing was restored");
}

#[test]
fn a_durable_url_never_shows_its_credentials() {
    let sandbox = Sandbox::new();
    // Nothing listens on port 1: the store cannot be reached.
    let url = "s3://AKIAEXAMPLEKEY:wJalrSECRETvalue@copies/prod?endpoint=http://127.0.0.1:1&region=us-east-1";
    for command in ["list", "verify"] {
        let text = sandbox.run(["copies", command, KEY, "--durable", url]);
        let line = text.failed(6, "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE");
        let json = sandbox.run(["copies", command, KEY, "--durable", url, "--json"]);
        let error = json.failed_json(6, "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE");
        assert!(!error["backendCode"].as_str().unwrap().is_empty(), "{error}");
        for secret in ["AKIAEXAMPLEKEY", "wJalrSECRETvalue"] {
            assert!(!line.contains(secret), "{secret} shown: {line}");
            assert!(!json.stderr.contains(secret), "{secret} shown: {}", json.stderr);
        }
        // The store is still named: its scheme, bucket and endpoint, credentials left out
        // (opened for reading, it is first reached by the listing).
        assert!(
            line.contains("in s3://copies/prod?region=us-east-1&endpoint=http://127.0.0.1:1"),
            "{line}"
        );
    }
    let restore = sandbox.run(["copies", "restore", KEY, "--durable", url, "--to", "look"]);
    let line = restore.failed(6, "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE");
    assert!(
        !line.contains("wJalrSECRETvalue") && !line.contains("AKIAEXAMPLEKEY"),
        "{line}"
    );
}

#[test]
fn a_missing_durable_folder_is_an_error_not_an_empty_store() {
    let sandbox = Sandbox::new();
    sandbox
        .run(["copies", "list", KEY, "--durable", "nowhere"])
        .failed(7, "ENOENT");
    assert!(!sandbox.path("nowhere").exists());
    sandbox
        .run(["copies", "list", "acme/not-a-tenant", "--durable", "."])
        .failed(5, "GOTRY_TENANT_ID_INVALID");
}

#[test]
fn restore_refuses_an_empty_or_file_system_root_before_opening_anything() {
    let sandbox = Sandbox::new();
    // The parser already refuses an empty value, as a usage error.
    let run = sandbox.run([
        "copies",
        "restore",
        KEY,
        "--to",
        "",
        "--force",
        "--durable",
        "nowhere",
    ]);
    run.failed(2, "USAGE");
    for to in ["/", "//", "/.."] {
        // The store does not exist: a check made after opening it would fail with ENOENT.
        let run = sandbox.run([
            "copies",
            "restore",
            KEY,
            "--to",
            to,
            "--force",
            "--durable",
            "nowhere",
        ]);
        let line = run.failed(5, "ERR_OUT_OF_RANGE");
        assert!(line.contains("--to must not be"), "{to:?}: {line}");
    }
    assert!(!sandbox.path("nowhere").exists());
}

/// Every path below `dir` with its size and modification time, to see that nothing changed.
fn tree(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        found.push((entry.path(), meta.len(), meta.modified().unwrap()));
        if meta.is_dir() {
            found.extend(tree(&entry.path()));
        }
    }
    found.sort();
    found
}

/// `copies list|verify|restore` and `router status` only read the durable store: no staging
/// folder, no file, no changed time appears in it (so a read-only mount serves them).
#[test]
fn reading_commands_never_write_to_the_durable_store() {
    let fixture = Fixture::new();
    std::fs::remove_dir(fixture.durable.join(".staging")).unwrap();
    let before = tree(&fixture.durable);
    fixture.run(&["list", KEY]).ok();
    fixture.run(&["verify", KEY]).ok();
    fixture.run(&["restore", KEY, "--to", "look"]).ok();
    fixture
        .sandbox
        .run([
            "router",
            "status",
            "--store",
            "leases.db",
            "--durable",
            fixture.durable.to_str().unwrap(),
        ])
        .ok();
    assert_eq!(tree(&fixture.durable), before);
    assert!(!fixture.durable.join(".staging").exists());
}

/// A store that is not there is one error, named, with one status, in every command and
/// however it is named (a path, a `file:` URL); a file in its place is another, the same
/// everywhere too. Nothing is created.
#[test]
fn a_missing_or_file_durable_store_is_one_error_in_every_command() {
    let fixture = Fixture::new();
    std::fs::write(fixture.sandbox.path("a-file"), b"").unwrap();
    let absolute = fixture.sandbox.path("nowhere");
    let names = [
        ("nowhere", "ENOENT"),
        ("file:nowhere", "ENOENT"),
        (&*format!("file://{}", absolute.display()), "ENOENT"),
        ("a-file", "ENOTDIR"),
        ("file:a-file", "ENOTDIR"),
    ];
    for (durable, code) in names {
        let commands: [Vec<&str>; 4] = [
            vec!["copies", "list", KEY],
            vec!["copies", "verify", KEY],
            vec!["copies", "restore", KEY, "--to", "look"],
            vec!["router", "status", "--store", "leases.db"],
        ];
        for mut command in commands {
            command.extend(["--durable", durable]);
            let run = fixture.sandbox.run(&command);
            let line = run.failed(7, code);
            let shown = durable.rsplit(['/', ':']).next().unwrap();
            assert!(line.contains(shown), "{command:?}: {line}");
        }
    }
    assert!(!absolute.exists() && !fixture.sandbox.path("look").exists());
}
