//! Real processes whose wall clocks libfaketime steps an hour either way (`FAKETIME=±1h`,
//! monotonic clock untouched, as an NTP step would leave it), contending for leases in one
//! SQLite file on this host. Without the store's host clock, the one an hour ahead is
//! granted a held lease (two writers) and the one an hour behind waits an hour for a dead
//! holder's.
//!
//! The binary is its own child: with `GOTRY_CLOCK_JUMP_CHILD` set it performs one acquire
//! and prints the outcome. Needs Debian's `faketime` (the test command installs it);
//! `GOTRY_SKIP_FAKETIME=1` skips, saying so.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gotry_tenant_state::{Error, LeaseStore, SqliteLeaseStore, SystemWallClock, WallClock};

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const HOUR_MS: i64 = 3_600_000;

fn main() {
    if let Ok(args) = std::env::var("GOTRY_CLOCK_JUMP_CHILD") {
        child(&args);
        return;
    }
    if !Path::new(LIBFAKETIME).exists() {
        if std::env::var_os("GOTRY_SKIP_FAKETIME").is_some() {
            println!("SKIPPED clock_jumps: GOTRY_SKIP_FAKETIME is set and {LIBFAKETIME} is missing");
            return;
        }
        panic!("{LIBFAKETIME} is missing: install Debian's faketime (or set GOTRY_SKIP_FAKETIME=1)");
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("leases.db");
    a_process_an_hour_ahead_is_not_granted_a_held_lease(&db);
    a_process_an_hour_behind_takes_over_a_dead_holder_on_time(&db);
    println!("clock_jumps: 2 passed");
}

fn a_process_an_hour_ahead_is_not_granted_a_held_lease(db: &Path) {
    let first = run(db, None, "ahead/k", "first", 30_000);
    assert_eq!(first.outcome, "granted 1", "{first:?}");
    let ahead = run(db, Some("+1h"), "ahead/k", "ahead", 30_000);
    assert!(
        ahead.wall_skew_ms > HOUR_MS - 60_000,
        "libfaketime moved its clock: {ahead:?}"
    );
    assert_eq!(ahead.outcome, "held first", "{ahead:?}");
    println!("a process an hour ahead is refused a held lease: ok");
}

fn a_process_an_hour_behind_takes_over_a_dead_holder_on_time(db: &Path) {
    let dead = run(db, None, "behind/k", "dead", 1_000);
    assert_eq!(dead.outcome, "granted 1", "{dead:?}");
    let early = run(db, Some("-1h"), "behind/k", "behind", 1_000);
    assert!(
        early.wall_skew_ms < -(HOUR_MS - 60_000),
        "libfaketime moved its clock: {early:?}"
    );
    assert_eq!(early.outcome, "held dead", "{early:?}");
    std::thread::sleep(Duration::from_millis(1_100));
    let behind = run(db, Some("-1h"), "behind/k", "behind", 1_000);
    assert_eq!(behind.outcome, "granted 2", "{behind:?}");
    println!("a process an hour behind takes over a dead holder's lease after its TTL: ok");
}

#[derive(Debug)]
struct Outcome {
    outcome: String,
    /// The child's wall clock minus ours, read around its run.
    wall_skew_ms: i64,
}

fn run(db: &Path, faketime: Option<&str>, key: &str, owner: &str, ttl_ms: i64) -> Outcome {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.env(
        "GOTRY_CLOCK_JUMP_CHILD",
        format!("{}\n{key}\n{owner}\n{ttl_ms}", db.display()),
    );
    if let Some(offset) = faketime {
        command
            .env("LD_PRELOAD", LIBFAKETIME)
            .env("FAKETIME", offset)
            .env("DONT_FAKE_MONOTONIC", "1");
    }
    let before = real_now_ms();
    let output = command.output().unwrap();
    assert!(output.status.success(), "child failed: {output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let (wall, outcome) = stdout.trim().split_once(' ').unwrap();
    Outcome {
        outcome: outcome.to_owned(),
        wall_skew_ms: wall.parse::<i64>().unwrap() - before,
    }
}

fn real_now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn child(args: &str) {
    let mut parts = args.split('\n');
    let (db, key, owner, ttl) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap().parse().unwrap(),
    );
    let store = SqliteLeaseStore::open(db).unwrap();
    let wall = SystemWallClock.now_ms().unwrap();
    match store.acquire(key, owner, ttl) {
        Ok(grant) => println!("{wall} granted {}", grant.record.epoch),
        Err(Error::LeaseHeld { record }) => println!("{wall} held {}", record.owner),
        Err(other) => panic!("{other}"),
    }
}
