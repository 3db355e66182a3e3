//! `lease read|history|list|release|forget` over a store filled through the core.

use std::path::PathBuf;
use std::sync::Arc;

use gotry_tenant_state::{
    LeaseRecord, LeaseStore, ManualClock, SqliteLeaseStore, SystemWallClock, WallClock,
};
use serde_json::Value;

use crate::{strings, Sandbox};

const HELD: &str = "acme/t-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const EXPIRED: &str = "acme/t-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const SECOND: &str = "beta/t-cccccccccccccccccccccccccccccccc";
const HOUR_MS: i64 = 3_600_000;

/// A store with three leases: HELD (replica-a, epoch 1, ten minutes left), EXPIRED
/// (replica-b, epoch 1, ran out 59 minutes ago) and SECOND (epoch 1 of replica-old an hour
/// ago, now epoch 2 of replica-c, ten minutes left).
struct Fixture {
    sandbox: Sandbox,
    store: PathBuf,
    held: LeaseRecord,
    expired: LeaseRecord,
    second: LeaseRecord,
}

impl Fixture {
    fn new() -> Fixture {
        let sandbox = Sandbox::new();
        let path = sandbox.path("leases.db");
        let an_hour_ago = SystemWallClock.now_ms().unwrap() - HOUR_MS;
        let past = SqliteLeaseStore::open(&path)
            .unwrap()
            .with_clock(Arc::new(ManualClock::new(an_hour_ago)));
        let expired = past.acquire(EXPIRED, "replica-b", 60_000).unwrap().record;
        past.acquire(SECOND, "replica-old", 60_000).unwrap();
        let live = past.with_clock(Arc::new(SystemWallClock));
        let held = live.acquire(HELD, "replica-a", 600_000).unwrap().record;
        let second = live.acquire(SECOND, "replica-c", 600_000).unwrap().record;
        assert_eq!(second.epoch, 2);
        live.close().unwrap();
        Fixture {
            sandbox,
            store: path,
            held,
            expired,
            second,
        }
    }

    /// Runs `gotry-tenant lease <args> --store <the fixture>`.
    fn lease(&self, args: &[&str]) -> crate::Run {
        let mut all: Vec<&str> = vec!["lease"];
        all.extend_from_slice(args);
        all.push("--store");
        all.push(self.store.to_str().unwrap());
        self.sandbox.run(all)
    }
}

fn assert_record(value: &Value, record: &LeaseRecord, held: bool) {
    assert_eq!(value["key"], record.key.as_str(), "{value}");
    assert_eq!(value["owner"], record.owner.as_str(), "{value}");
    assert_eq!(value["epoch"], record.epoch, "{value}");
    assert_eq!(value["leaseUntilMs"], record.lease_until_ms, "{value}");
    assert_eq!(value["forgottenAtEpoch"], record.forgotten_at_epoch, "{value}");
    assert_eq!(value["held"], held, "{value}");
    let expires_in = value["expiresInMs"].as_i64().unwrap();
    assert_eq!(expires_in > 0, held, "{value}");
}

/// The number that `text` starts with, followed by `rest`.
fn minutes(text: &str, rest: &str) -> i64 {
    let number = text
        .strip_suffix(rest)
        .unwrap_or_else(|| panic!("{text:?} does not end with {rest:?}"));
    number
        .parse()
        .unwrap_or_else(|_| panic!("{number:?} is not a number"))
}

fn keys(value: &Value, field: &str) -> Vec<String> {
    value[field]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["key"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn read_shows_a_record_and_its_state() {
    let f = Fixture::new();
    let json = f.lease(&["read", HELD, "--json"]);
    assert_record(&json.json(), &f.held, true);
    assert!(json.json()["expiresInMs"].as_i64().unwrap() <= 600_000);

    let text = f.lease(&["read", EXPIRED]);
    let text = text.ok();
    assert!(text.contains("owner      replica-b\n"), "{text}");
    assert!(text.contains("epoch      1\n"), "{text}");
    let state = text.lines().find(|l| l.starts_with("state")).unwrap();
    let ago = state.strip_prefix("state      expired, expired ").unwrap();
    let (ago, at) = ago.split_once(" min ago (").unwrap();
    assert!(minutes(ago, "") >= 59, "{state}");
    assert!(
        at.ends_with("Z)") && at.len() == "2026-01-01T00:00:00.000Z)".len(),
        "{state}"
    );
    let held = f.lease(&["read", SECOND]);
    let held = held.ok();
    assert!(held.contains("state      held, expires in "), "{held}");
    assert!(held.contains("owner      replica-c\nepoch      2\n"), "{held}");
}

#[test]
fn read_of_an_unknown_key_is_null_not_an_error() {
    let f = Fixture::new();
    let none = "acme/t-dddddddddddddddddddddddddddddddd";
    assert_eq!(f.lease(&["read", none, "--json"]).json(), Value::Null);
    let text = f.lease(&["read", none]);
    assert_eq!(text.ok(), format!("no lease recorded for {none}\n"));
}

#[test]
fn list_filters_by_state_and_prefix() {
    let f = Fixture::new();
    let all = f.lease(&["list", "--json"]).json();
    assert_eq!(keys(&all, "leases"), [HELD, EXPIRED, SECOND]);
    assert_record(&all["leases"][0], &f.held, true);
    assert_record(&all["leases"][1], &f.expired, false);
    assert_record(&all["leases"][2], &f.second, true);
    assert!(all["nowMs"].as_i64().unwrap() >= f.second.lease_until_ms - 600_000);

    assert_eq!(
        keys(&f.lease(&["list", "--held", "--json"]).json(), "leases"),
        [HELD, SECOND]
    );
    assert_eq!(
        keys(&f.lease(&["list", "--expired", "--json"]).json(), "leases"),
        [EXPIRED]
    );
    assert_eq!(
        keys(
            &f.lease(&["list", "--prefix", "acme/", "--json"]).json(),
            "leases"
        ),
        [HELD, EXPIRED]
    );
    let both = f.lease(&["list", "--held", "--prefix", "acme/", "--json"]).json();
    assert_eq!(keys(&both, "leases"), [HELD]);
    let nothing = f.lease(&["list", "--prefix", "zeta/", "--json"]).json();
    assert_eq!(keys(&nothing, "leases"), Vec::<String>::new());
    assert_eq!(
        f.lease(&["list", "--expired", "--prefix", "beta/"]).ok(),
        "no expired leases under beta/\n"
    );
    f.lease(&["list", "--held", "--expired"]).failed(2, "USAGE");
}

#[test]
fn list_prints_a_table_with_relative_times() {
    let f = Fixture::new();
    let run = f.lease(&["list"]);
    let lines: Vec<&str> = run.ok().lines().collect();
    assert_eq!(lines.len(), 6, "{lines:?}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["KEY", "OWNER", "EPOCH", "STATE", "EXPIRY", "FORGOTTEN"]);
    let row = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let held = row(lines[1]);
    assert_eq!(&held[..4], [HELD, "replica-a", "1", "held"]);
    assert_eq!(&held[4..6], ["expires", "in"]);
    assert!(held[7] == "min" && minutes(&held[6], "") <= 10, "{held:?}");
    let expired = row(lines[2]);
    assert_eq!(&expired[..5], [EXPIRED, "replica-b", "1", "expired", "expired"]);
    assert!(minutes(&expired[5], "") >= 59, "{expired:?}");
    assert_eq!(&expired[6..], ["min", "ago", "0"]);
    assert_eq!(&row(lines[3])[..4], [SECOND, "replica-c", "2", "held"]);
    assert_eq!(lines[4], "");
    assert_eq!(lines[5], "3 leases, 2 held");
    // Columns line up: every row starts its owner where the header does.
    let owner_at = lines[0].find("OWNER").unwrap();
    for line in &lines[1..4] {
        assert!(line[owner_at..].starts_with("replica-"), "{line}");
    }
}

#[test]
fn history_is_the_log_in_order_and_can_be_limited() {
    let f = Fixture::new();
    let all = f.lease(&["history", "--json"]).json();
    let entries: Vec<(String, String, String, i64)> = all["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["key"].as_str().unwrap().to_owned(),
                e["op"].as_str().unwrap().to_owned(),
                e["owner"].as_str().unwrap().to_owned(),
                e["epoch"].as_i64().unwrap(),
            )
        })
        .collect();
    let expected = [
        (EXPIRED, "replica-b", 1),
        (SECOND, "replica-old", 1),
        (HELD, "replica-a", 1),
        (SECOND, "replica-c", 2),
    ]
    .map(|(k, o, e)| (k.to_owned(), "acquire".to_owned(), o.to_owned(), e));
    assert_eq!(entries, expected);
    assert_eq!(all["entries"][0]["atMs"], f.expired.lease_until_ms - 60_000);

    let of_key = f.lease(&["history", SECOND, "--json"]).json();
    let owners = strings(&of_key["entries"], "owner");
    assert_eq!(owners, ["replica-old", "replica-c"]);

    let latest = f.lease(&["history", "--limit", "2", "--json"]).json();
    assert_eq!(keys(&latest, "entries"), [HELD, SECOND]);
    assert_eq!(
        keys(
            &f.lease(&["history", "--limit", "99", "--json"]).json(),
            "entries"
        )
        .len(),
        4
    );
    f.lease(&["history", "--limit", "0"]).failed(2, "USAGE");
    f.lease(&["history", "--limit", "-1"]).failed(2, "USAGE");

    let text = f.lease(&["history", SECOND]);
    let lines: Vec<&str> = text.ok().lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("AT (UTC)"), "{}", lines[0]);
    let when: Vec<&str> = lines[1].split_whitespace().collect();
    assert!(
        minutes(when[1], "") >= 60 && when[2..5] == ["min", "ago", "acquire"],
        "{}",
        lines[1]
    );
    assert!(lines[1].contains("replica-old"), "{}", lines[1]);
    assert!(
        lines[2].contains(" ago ") && lines[2].contains("replica-c"),
        "{}",
        lines[2]
    );
    let none = f.lease(&["history", "acme/t-dddddddddddddddddddddddddddddddd"]);
    assert!(none.ok().starts_with("no operations recorded for acme/t-"));
}

#[test]
fn release_passes_the_stores_decision_through() {
    let f = Fixture::new();
    // Not the holder: refused, and nothing changes.
    let wrong = f.lease(&["release", HELD, "--owner", "replica-b", "--epoch", "1"]);
    let line = wrong.failed(4, "GOTRY_TENANT_LEASE_LOST");
    assert!(line.contains("epoch 1 is not held by replica-b"), "{line}");
    assert!(line.contains("lease read"), "the hint says what to do: {line}");
    let stale = f.lease(&[
        "release",
        SECOND,
        "--owner",
        "replica-c",
        "--epoch",
        "1",
        "--json",
    ]);
    stale.failed_json(4, "GOTRY_TENANT_LEASE_LOST");
    assert_record(&f.lease(&["read", HELD, "--json"]).json(), &f.held, true);

    let released = f
        .lease(&["release", HELD, "--owner", "replica-a", "--epoch", "1", "--json"])
        .json();
    assert_eq!(released["epoch"], 1);
    assert_eq!(released["held"], false);
    assert!(released["leaseUntilMs"].as_i64().unwrap() < f.held.lease_until_ms);
    assert_eq!(f.lease(&["read", HELD, "--json"]).json()["held"], false);
    let log = f.lease(&["history", HELD, "--json"]).json();
    assert_eq!(log["entries"][1]["op"], "release");
    assert_eq!(log["entries"][1]["owner"], "replica-a");

    // The holder of an expired epoch may still release it; the text says what comes next.
    let text = f.lease(&["release", EXPIRED, "--owner", "replica-b", "--epoch", "1"]);
    let text = text.ok();
    assert!(
        text.starts_with(&format!("released {EXPIRED}: epoch 1 of replica-b ended at ")),
        "{text}"
    );
    assert!(text.ends_with("the next acquire gets epoch 2\n"), "{text}");
}

#[test]
fn forget_needs_the_unexpired_holder() {
    let f = Fixture::new();
    let forgotten = f
        .lease(&["forget", SECOND, "--owner", "replica-c", "--epoch", "2", "--json"])
        .json();
    assert_eq!(forgotten["forgottenAtEpoch"], 2);
    assert_eq!(forgotten["epoch"], 2);
    assert_eq!(forgotten["held"], true);
    let text = f.lease(&["read", SECOND]);
    assert!(text
        .ok()
        .contains("forgotten  durable copies up to epoch 2 are dead"));

    let expired = f.lease(&["forget", EXPIRED, "--owner", "replica-b", "--epoch", "1"]);
    let line = expired.failed(4, "GOTRY_TENANT_LEASE_LOST");
    assert!(line.contains("expired"), "{line}");
    f.lease(&["forget", HELD, "--owner", "replica-a", "--epoch", "2"])
        .failed(4, "GOTRY_TENANT_LEASE_LOST");
    assert_eq!(f.lease(&["read", HELD, "--json"]).json()["forgottenAtEpoch"], 0);
}

#[test]
fn bad_repair_arguments_are_refused_before_anything_changes() {
    let f = Fixture::new();
    for epoch in ["0", "-1"] {
        let run = f.lease(&["release", HELD, "--owner", "replica-a", "--epoch", epoch]);
        let line = run.failed(5, "ERR_OUT_OF_RANGE");
        assert!(line.contains(&format!("got {epoch}")), "{line}");
    }
    for epoch in ["1.5", "one", "99999999999999999999"] {
        f.lease(&["release", HELD, "--owner", "replica-a", "--epoch", epoch])
            .failed(2, "USAGE");
    }
    let missing = f.lease(&["release", HELD, "--epoch", "1"]);
    assert!(missing.failed(2, "USAGE").contains("--owner"));
    let long_owner = "o".repeat(201);
    let run = f.lease(&["release", HELD, "--owner", &long_owner, "--epoch", "1"]);
    run.failed(5, "ERR_OUT_OF_RANGE");
    f.lease(&["read", ""]).failed(5, "ERR_OUT_OF_RANGE");
    assert_record(&f.lease(&["read", HELD, "--json"]).json(), &f.held, true);
}

#[cfg(unix)]
#[test]
fn arguments_that_are_not_utf8_are_refused_not_altered() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let f = Fixture::new();
    let key = OsStr::from_bytes(b"acme/t-\xff");
    let run = f.sandbox.run([
        OsStr::new("lease"),
        OsStr::new("read"),
        key,
        OsStr::new("--store"),
        f.store.as_os_str(),
    ]);
    assert!(run
        .failed(5, "ERR_INVALID_UTF8")
        .contains("the key is not valid UTF-8"));
}

/// An owner (free text in the store) holding a right-to-left override, a zero width space,
/// line and paragraph separators and a bidi isolate: text output shows each escaped, JSON
/// gives it back exactly.
#[test]
fn invisible_and_bidi_characters_are_escaped_in_text_and_exact_in_json() {
    let sandbox = Sandbox::new();
    let path = sandbox.path("leases.db");
    let owner = "replica-a\u{202e}gnp\u{200b}x\u{2028}y\u{2029}\u{2066}z\u{feff}";
    let store = SqliteLeaseStore::open(&path).unwrap();
    store.acquire(HELD, owner, 600_000).unwrap();
    store.close().unwrap();
    let store_arg = path.to_str().unwrap();
    let shown = "replica-a\\u{202e}gnp\\u{200b}x\\u{2028}y\\u{2029}\\u{2066}z\\u{feff}";
    let hidden = [
        '\u{202e}', '\u{200b}', '\u{2028}', '\u{2029}', '\u{2066}', '\u{feff}',
    ];
    for args in [
        vec!["lease", "list", "--store", store_arg],
        vec!["lease", "read", HELD, "--store", store_arg],
        vec!["lease", "history", "--store", store_arg],
        vec!["router", "status", "--store", store_arg, "--durable", "."],
    ] {
        let run = sandbox.run(&args);
        let text = run.ok();
        assert!(text.contains(shown), "{args:?}: {text}");
        assert!(!text.contains(hidden), "{args:?} printed one raw: {text:?}");
    }
    // The table stays aligned: the escaped owner is measured as it is printed.
    let list = sandbox.run(["lease", "list", "--store", store_arg]);
    let lines: Vec<&str> = list.ok().lines().collect();
    assert_eq!(lines[0].find("OWNER"), lines[1].find("replica-a"), "{lines:?}");

    let json = sandbox
        .run(["lease", "list", "--json", "--store", store_arg])
        .json();
    assert_eq!(json["leases"][0]["owner"], owner);
    let json = sandbox
        .run(["lease", "history", "--json", "--store", store_arg])
        .json();
    assert_eq!(json["entries"][0]["owner"], owner);
}

/// A log written an hour ago on a manual clock, with renewals of two tenures (one of them
/// released): `lease compact` on the store's real clock deletes every renewal but the last of
/// each tenure, keeps every acquire and release, and says how many rows went.
#[test]
fn compact_prunes_old_renewals_but_the_last_of_each_tenure() {
    let sandbox = Sandbox::new();
    let path = sandbox.path("leases.db");
    let clock = Arc::new(ManualClock::new(SystemWallClock.now_ms().unwrap() - HOUR_MS));
    let store = SqliteLeaseStore::open(&path).unwrap().with_clock(clock.clone());
    store.acquire(EXPIRED, "replica-a", 60_000).unwrap();
    for _ in 0..5 {
        clock.advance(10_000).unwrap();
        store.renew(EXPIRED, "replica-a", 1, 60_000).unwrap();
    }
    store.release(EXPIRED, "replica-a", 1).unwrap();
    store.acquire(EXPIRED, "replica-b", 60_000).unwrap();
    for _ in 0..3 {
        clock.advance(10_000).unwrap();
        store.renew(EXPIRED, "replica-b", 2, 60_000).unwrap();
    }
    // Past the ten-minute retention on this clock too; the store has not written since.
    clock.advance(11 * 60_000).unwrap();
    store.close().unwrap();
    let store_arg = path.to_str().unwrap();
    let ops = |sandbox: &Sandbox| -> Vec<(String, String, i64)> {
        let json = sandbox
            .run(["lease", "history", "--json", "--store", store_arg])
            .json();
        json["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["op"].as_str().unwrap().to_owned(),
                    e["owner"].as_str().unwrap().to_owned(),
                    e["atMs"].as_i64().unwrap(),
                )
            })
            .collect()
    };
    let before = ops(&sandbox);
    assert_eq!(before.len(), 11, "{before:?}");

    let run = sandbox.run(["lease", "compact", "--store", store_arg]);
    let text = run.ok();
    assert!(
        text.starts_with("deleted 6 renewals older than the store's retention"),
        "{text}"
    );
    let after = ops(&sandbox);
    let kept: Vec<(&str, &str)> = after
        .iter()
        .map(|(op, owner, _)| (op.as_str(), owner.as_str()))
        .collect();
    assert_eq!(
        kept,
        [
            ("acquire", "replica-a"),
            ("renew", "replica-a"),
            ("release", "replica-a"),
            ("acquire", "replica-b"),
            ("renew", "replica-b"),
        ]
    );
    // The renewals kept are the last of each tenure.
    assert_eq!(after[1], before[5]);
    assert_eq!(after[4], before[10]);

    // Nothing is left to prune; JSON says so as a number.
    let again = sandbox
        .run(["lease", "compact", "--json", "--store", store_arg])
        .json();
    assert_eq!(again["deleted"], 0);
    assert!(again["nowMs"].as_i64().unwrap() > before[10].2);
    assert_eq!(ops(&sandbox), after);
}

#[test]
fn compact_never_creates_a_store() {
    let sandbox = Sandbox::new();
    sandbox
        .run(["lease", "compact", "--store", "missing.db"])
        .failed(7, "ENOENT");
    assert!(!sandbox.path("missing.db").exists());
}
