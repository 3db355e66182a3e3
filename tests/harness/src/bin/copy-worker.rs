//! A copy writer to be killed: holds one tenant's lease, restores the tenant's newest copy,
//! keeps its ledger written by a thread of its own, and writes copies in a loop until it is
//! killed (or has written `--copies`).
//!
//! `copy-worker --leases FILE --store URL --key ORG/TENANT --owner NAME --root DIR
//!  --clock-offset-ms N [--ttl-ms T] [--pad-bytes B] [--state-bytes B] [--seed S] [--copies N]`
//!
//! The lease store is the SQLite file `--leases`, read on the system clock shifted by
//! `--clock-offset-ms` (see [`OffsetClock`]); `--store` is any durable store URL. The
//! tenant root `--root` is restored first; an empty start creates the ledger with
//! `--pad-bytes` of padding (default 3 MiB) and the blobs (see `gotry_tenant_harness::crash_copies`).
//!
//! Stdout, one JSON object a line, each flushed before the worker goes on:
//! `{"event":"ready","pid":P,"epoch":E,"restored":[e,s]|null,"rows":N}` once the tenure began,
//! then `{"event":"copy","epoch":E,"seq":S,"rows":N,"files":F,"bytes":B,"ms":T}` after each
//! copy `write_copy` acknowledged, where `rows` is the number of committed ledger rows in
//! that copy's image: the ledger's writer waits while a copy is written, so the rows committed
//! before it are the copy's (the copy reads the ledger from its WAL, or through the snapshot
//! function below, which counts the image's rows too, and the two must agree). Any failure
//! ends the worker with status 1 and a line on stderr.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gotry_tenant_harness::crash_copies::{self as cc, OffsetClock, Rng};
use gotry_tenant_harness::Flags;
use gotry_tenant_state::{
    open_durable_store, EpochCopies, HostSnapshot, LeaseOptions, SqliteLeaseStore, SqliteOptions,
    SystemMonotonicClock, TenantLease,
};

struct Args {
    leases: PathBuf,
    store: String,
    key: String,
    owner: String,
    root: PathBuf,
    clock_offset_ms: i64,
    ttl_ms: i64,
    pad_bytes: usize,
    state_bytes: usize,
    seed: u64,
    copies: Option<u64>,
}

fn parse() -> Result<Args, String> {
    let flags = Flags::from_args()?;
    let number = |name: &str, default: Option<i64>| -> Result<i64, String> {
        match (flags.get(name), default) {
            (Some(value), _) => value
                .parse()
                .map_err(|_| format!("--{name} must be a whole number")),
            (None, Some(default)) => Ok(default),
            (None, None) => Err(format!("--{name} is required")),
        }
    };
    let unsigned = |name: &str, default: u64| -> Result<u64, String> {
        flags.get(name).map_or(Ok(default), |value| {
            value
                .parse()
                .map_err(|_| format!("--{name} must be a whole number, not negative"))
        })
    };
    Ok(Args {
        leases: PathBuf::from(flags.text("leases")?),
        store: flags.text("store")?,
        key: flags.text("key")?,
        owner: flags.text("owner")?,
        root: PathBuf::from(flags.text("root")?),
        clock_offset_ms: number("clock-offset-ms", None)?,
        ttl_ms: number("ttl-ms", Some(60_000))?,
        pad_bytes: usize::try_from(unsigned("pad-bytes", 3 << 20)?).map_err(|e| e.to_string())?,
        state_bytes: usize::try_from(unsigned("state-bytes", 64 << 10)?)
            .map_err(|e| e.to_string())?
            // A quarter of it still too large to ride inline (16 KiB).
            .max(64 << 10),
        seed: unsigned("seed", u64::from(std::process::id()))?,
        copies: flags.get("copies").map(|_| unsigned("copies", 0)).transpose()?,
    })
}

fn main() -> ExitCode {
    match parse().and_then(|args| run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("copy-worker: {message}");
            ExitCode::from(1)
        }
    }
}

/// One line of stdout, flushed: once it is written the parent may count on it.
fn say(value: serde_json::Value) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{value}")
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

fn run(args: &Args) -> Result<(), String> {
    let fail = |what: &str| {
        let what = what.to_owned();
        move |e: gotry_tenant_state::Error| format!("{what}: {e}")
    };
    let mut rng = Rng::new(args.seed);
    let leases = SqliteLeaseStore::open_with(
        &args.leases,
        SqliteOptions {
            clock: Arc::new(OffsetClock(args.clock_offset_ms)),
            ..SqliteOptions::default()
        },
    )
    .map_err(fail("opening the lease store"))?;
    let lease = TenantLease::acquire(LeaseOptions {
        key: args.key.clone(),
        replica_id: args.owner.clone(),
        store: Arc::new(leases),
        ttl_ms: args.ttl_ms,
        margin_ms: args.ttl_ms / 10,
        clock: Arc::new(SystemMonotonicClock),
    })
    .map_err(fail("acquiring the lease"))?;
    let store = open_durable_store(&args.store).map_err(fail("opening the durable store"))?;

    // The ledger is open in this process (its writer thread) while copies are taken, so the
    // copies read it through this snapshot, which also counts the rows the image holds.
    // Opening a second connection here is safe: this process has one SQLite library (the
    // core's and this crate's rusqlite are the same build), which shares one set of POSIX
    // locks between every connection to a file.
    let image_rows = Arc::new(Mutex::new(None::<u64>));
    let snapshot: HostSnapshot = {
        let image_rows = image_rows.clone();
        Arc::new(move |source: &Path, image: &Path| {
            let sqlite = |e| cc::host_failure(source, e);
            let db = rusqlite::Connection::open(source).map_err(sqlite)?;
            db.busy_timeout(Duration::from_secs(5)).map_err(sqlite)?;
            db.execute("VACUUM INTO ?1", [image.to_string_lossy()])
                .map_err(sqlite)?;
            drop(db);
            let rows = cc::ledger_rows(image).map_err(|e| cc::host_failure(image, e))?;
            *image_rows.lock().unwrap() = Some(rows);
            Ok(())
        })
    };
    let copies = EpochCopies::new(store).with_host_snapshot(Some(snapshot));

    let fold: &dyn Fn(&Path) -> gotry_tenant_state::Result<bool> = &cc::fold_check;
    let restored = copies
        .restore(&lease, &args.root, Some(fold))
        .map_err(fail("restoring"))?;
    let ledger = args.root.join(cc::LEDGER);
    if restored.restored.is_none() {
        cc::start_empty(&args.root, args.pad_bytes, &mut rng)?;
    }
    let (mut db, mut next) = cc::open_ledger(&ledger).map_err(|e| format!("opening the ledger: {e}"))?;
    say(serde_json::json!({
        "event": "ready",
        "pid": std::process::id(),
        "epoch": lease.epoch(),
        "restored": restored.restored.map(|id| [id.epoch as u64, id.seq]),
        "rows": next - 1,
    }))?;

    // The ledger's writer: small transactions, a short pause between them, until killed. It
    // holds `committed` (the rows committed so far) while it writes.
    let committed = Arc::new(Mutex::new(next - 1));
    let mut writer_rng = Rng::new(rng.next_u64());
    let writing = committed.clone();
    std::thread::spawn(move || loop {
        let count = 1 + writer_rng.below(3) as usize;
        let mut rows = writing.lock().unwrap();
        match cc::append_rows(&mut db, next, count, &mut writer_rng) {
            Ok(after) => next = after,
            Err(e) => {
                eprintln!("copy-worker: the ledger's writer failed: {e}");
                std::process::exit(1);
            }
        }
        *rows = next - 1;
        drop(rows);
        std::thread::sleep(Duration::from_micros(500 + writer_rng.below(1_500)));
    });

    let mut written = 0u64;
    while args.copies.is_none_or(|limit| written < limit) {
        // Between copies the host changes a plain file too, whole (by rename), of a quarter of
        // `--state-bytes` and up: too large to ride inline in the manifest, so each copy stores
        // an object before its manifest, the window the kills must land in (the ledger's small
        // deltas ride inline).
        let state = format!("{} epoch {} copy {written}", args.owner, lease.epoch());
        let mut payload = state.into_bytes();
        let least = args.state_bytes / 4;
        let padding = least + rng.below((args.state_bytes - least) as u64) as usize;
        payload.extend(rng.bytes(padding));
        cc::write_blob(&args.root.join(cc::STATE_FILE), &payload)
            .map_err(|e| format!("writing the state file: {e}"))?;

        *image_rows.lock().unwrap() = None;
        let started = Instant::now();
        let paused = committed.lock().unwrap();
        let copy = copies
            .write_copy(&lease, &args.root)
            .map_err(fail("writing a copy"))?;
        let rows = *paused;
        drop(paused);
        if let Some(imaged) = image_rows.lock().unwrap().take() {
            if i64::try_from(imaged).ok() != Some(rows) {
                return Err(format!(
                    "the snapshot's image holds {imaged} rows, the ledger {rows}"
                ));
            }
        }
        say(serde_json::json!({
            "event": "copy",
            "epoch": copy.id.epoch,
            "seq": copy.id.seq,
            "rows": rows,
            "files": copy.files,
            "bytes": copy.bytes,
            "ms": started.elapsed().as_secs_f64() * 1000.0,
        }))?;
        written += 1;
    }
    Ok(())
}
