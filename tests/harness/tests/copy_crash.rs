//! `kill -9` of a process in the middle of writing a copy, many times, at seeded random
//! moments, on the directory store and on a real S3-compatible server (moto).
//!
//! Each round starts `copy-worker` as the tenant's next holder: it acquires the lease,
//! restores, keeps its ledger written by a thread and writes copies until it is SIGKILLed.
//! Then this process checks the store and takes the tenure itself:
//! - every object under a real name is whole: the files of a copy with a manifest match the
//!   manifest's sizes and SHA-256; an object of a copy without one (which does not exist) is
//!   whole by its own header (a blob's length and hash, a SQLite image's page count and
//!   `integrity_check`); in the directory store nothing but objects sits beside real names
//!   (a writer's temporary files stay in `.staging`);
//! - a copy is incomplete only if it was the last one of its epoch, and every complete copy
//!   verifies (`verify` is None);
//! - the next holder (a lease of a later epoch, with no waiting: see `OffsetClock`) restores
//!   the newest complete copy, which is the last acknowledged one or a later one, whose
//!   ledger passes `integrity_check` and the fold check and holds at least the rows the last
//!   acknowledgement named (exactly those when it is that copy); `restore_latest` agrees
//!   (checked every fourth round); it writes a copy of its own, which the next worker must
//!   restore.
//!
//! Each kill is placed by the store's state afterwards: inside a copy (objects of it under
//! real names, no manifest yet), after a manifest but before the acknowledgement, or between
//! copies (taking the snapshot, or staging the first object). The run fails if no kill
//! landed inside a copy. The seed is printed; `GOTRY_COPY_CRASH_SEED=<n>` replays a run's
//! choices (which plan, how long to wait); where the kill lands still depends on timing.
//!
//! The S3 run needs `GOTRY_MOTO_SERVER` (see scripts/s3-server.sh); `GOTRY_SKIP_S3=1`
//! skips it, as it skips the core's S3 tests.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gotry_tenant_harness::crash_copies::{self as cc, OffsetClock, Rng};
use gotry_tenant_state::{
    open_durable_store, tenant_root_for, CopyId, DurableStore, EpochCopies, LeaseOptions, LeaseStore,
    SqliteLeaseStore, SqliteOptions, SystemMonotonicClock, TenantLease,
};
use gotry_test_support::moto::MotoServer;

const ORG: &str = "acme";
const TENANT: &str = "t-c0ffee00c0ffee00c0ffee00c0ffee00";
const HOUR_MS: i64 = 3_600_000;
const TTL_MS: i64 = 60_000;
/// How long any one step of a worker may take before the run calls it stuck.
const PATIENCE: Duration = Duration::from_secs(30);

fn key() -> String {
    format!("{ORG}/{TENANT}")
}

fn tenant_prefix() -> String {
    format!("orgs/{ORG}/tenants/{TENANT}/epochs/")
}

fn fold(root: &Path) -> gotry_tenant_state::Result<bool> {
    cc::fold_check(root)
}

/// The seed of this run: `GOTRY_COPY_CRASH_SEED`, or the clock's.
fn seed() -> u64 {
    match std::env::var("GOTRY_COPY_CRASH_SEED") {
        Ok(text) => text
            .trim()
            .parse()
            .expect("GOTRY_COPY_CRASH_SEED is a whole number"),
        Err(_) => {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_000_007
        }
    }
}

/// Straight to the process's stderr: the test harness captures `println!` of a passing
/// test, and these lines are the run's evidence.
fn report(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// A running worker; killed (and reaped) when dropped, so a failing check leaves no process.
struct Worker {
    child: Child,
    lines: Receiver<(Instant, String)>,
    stderr: PathBuf,
}

impl Worker {
    fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The next line, or `None` once the worker closed its stdout (it ended).
    fn next_line(&mut self, timeout: Duration) -> Option<(Instant, serde_json::Value)> {
        match self.lines.recv_timeout(timeout) {
            Ok((at, line)) => Some((
                at,
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("worker line {line:?}: {e}")),
            )),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!(
                "the worker said nothing for {timeout:?}; its stderr:\n{}",
                self.stderr_text()
            ),
        }
    }

    /// A line that must come: the worker ending instead is a failure.
    fn expect_line(&mut self) -> (Instant, serde_json::Value) {
        match self.next_line(PATIENCE) {
            Some(line) => line,
            None => {
                let status = self.child.wait().unwrap();
                panic!("the worker ended ({status}); its stderr:\n{}", self.stderr_text())
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the worker acknowledged of a copy.
#[derive(Debug, Clone, Copy)]
struct Ack {
    id: CopyId,
    rows: u64,
    ms: f64,
}

fn ack_of(line: &serde_json::Value) -> Ack {
    Ack {
        id: CopyId {
            epoch: line["epoch"].as_i64().expect("epoch"),
            seq: line["seq"].as_u64().expect("seq"),
        },
        rows: line["rows"].as_u64().expect("rows"),
        ms: line["ms"].as_f64().expect("ms"),
    }
}

/// Where a kill landed, judged by what the store holds afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Landing {
    /// Objects of a copy under real names, its manifest not yet: the interesting window.
    InsideCopy,
    /// The manifest was created but the acknowledgement not yet printed.
    AfterManifest,
    /// Between copies: taking the snapshot, or putting the first object.
    BetweenCopies,
}

/// The objects of one copy as listed.
#[derive(Debug, Default)]
struct ListedCopy {
    manifest: Option<String>,
    /// An empty manifest: the name the directory store reserved for the next copy (see
    /// `DurableStore::reserve`), no copy.
    reserved: bool,
    /// The copy's own objects by their name in `files/` (`000003`, `000003.000001` for a piece of a
    /// base in format 4, or `000003.delta`).
    files: BTreeMap<String, String>,
}

struct Run {
    name: &'static str,
    url: String,
    store: Arc<dyn DurableStore>,
    /// The directory store's folder, walked on disk as well as listed.
    folder: Option<PathBuf>,
    work: tempfile::TempDir,
    leases: PathBuf,
    rng: Rng,
    pad_bytes: usize,
    /// The most bytes of the state file each copy stores as an object (see the worker's
    /// `--state-bytes`).
    state_bytes: usize,
    /// Objects already found whole, and complete copies already verified.
    checked: HashSet<String>,
    verified: BTreeSet<CopyId>,
    /// The copy the previous holder wrote, and its rows.
    handed_over: Option<Ack>,
    copy_ms: Vec<f64>,
    landings: Vec<Landing>,
    staging_left: usize,
    acked: usize,
}

impl Run {
    fn new(
        name: &'static str,
        url: String,
        folder: Option<PathBuf>,
        seed: u64,
        (pad_bytes, state_bytes): (usize, usize),
    ) -> Run {
        let work = tempfile::tempdir().unwrap();
        let leases = work.path().join("leases.db");
        // Created once up front, so the first worker does not create the schema mid-round.
        SqliteLeaseStore::open(&leases).unwrap().close().unwrap();
        Run {
            name,
            store: open_durable_store(&url).unwrap(),
            url,
            folder,
            work,
            leases,
            rng: Rng::new(seed),
            pad_bytes,
            state_bytes,
            checked: HashSet::new(),
            verified: BTreeSet::new(),
            handed_over: None,
            copy_ms: Vec::new(),
            landings: Vec::new(),
            staging_left: 0,
            acked: 0,
        }
    }

    fn offset(round: u64) -> i64 {
        round as i64 * 2 * HOUR_MS
    }

    fn spawn(&mut self, round: u64) -> Worker {
        let folder = self.work.path().join(format!("w{round}"));
        std::fs::create_dir_all(&folder).unwrap();
        let root = tenant_root_for(&folder, ORG, TENANT).unwrap();
        let stderr = folder.join("stderr.txt");
        let mut command = Command::new(env!("CARGO_BIN_EXE_copy-worker"));
        command
            .args(["--leases", self.leases.to_str().unwrap(), "--store", &self.url])
            .args(["--key", &key(), "--owner", &format!("w{round}")])
            .args(["--root", root.to_str().unwrap()])
            .args(["--clock-offset-ms", &Self::offset(round).to_string()])
            .args(["--ttl-ms", &TTL_MS.to_string()])
            .args(["--pad-bytes", &self.pad_bytes.to_string()])
            .args(["--state-bytes", &self.state_bytes.to_string()])
            .args(["--seed", &self.rng.next_u64().to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap());
        die_with_this_thread(&mut command);
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            // A line cut by the kill has no newline: it was never said, and `lines` drops it
            // only at the end, so stop at the first read that is not a whole line.
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(n) if n > 0 && line.ends_with('\n') => {
                        if send.send((Instant::now(), line)).is_err() {
                            return;
                        }
                    }
                    _ => return,
                }
            }
        });
        Worker { child, lines, stderr }
    }

    /// A typical copy's duration so far (the median), for placing kills.
    fn typical_copy(&self) -> Duration {
        let mut ms = self.copy_ms.clone();
        ms.sort_by(f64::total_cmp);
        Duration::from_secs_f64(ms.get(ms.len() / 2).copied().unwrap_or(100.0) / 1000.0)
    }

    fn round(&mut self, round: u64) {
        let spawned = Instant::now();
        let mut worker = self.spawn(round);
        let (ready_at, ready) = worker.expect_line();
        assert_eq!(ready["event"], "ready", "{ready}");
        let epoch = ready["epoch"].as_i64().unwrap();
        let pid = ready["pid"].as_u64().unwrap();
        let ready_rows = ready["rows"].as_u64().unwrap();
        // The worker took over what the previous holder handed over, exactly.
        match self.handed_over {
            Some(previous) => {
                assert_eq!(
                    ready["restored"],
                    serde_json::json!([previous.id.epoch, previous.id.seq]),
                    "round {round}: the worker restored another copy than its predecessor's"
                );
                assert_eq!(ready_rows, previous.rows, "round {round}: rows after restore");
            }
            None => assert!(ready["restored"].is_null(), "{ready}"),
        }

        // Where to kill: some time after the start, or some way into the copy after the
        // k-th acknowledgement. That copy starts once the worker has rewritten its state file
        // and ends with the window (its objects stored, its manifest not yet): the kill falls
        // from half a typical copy after the acknowledgement to one and a half, which holds
        // the window whole.
        let typical = self.typical_copy();
        let mut acks = Vec::new();
        let plan = if self.rng.below(10) < 3 {
            let wait = typical.mul_f64(2.0 * self.rng.below(1_000) as f64 / 1_000.0);
            std::thread::sleep(wait.saturating_sub(ready_at.elapsed()));
            format!("{} ms after ready", wait.as_millis())
        } else {
            let k = 1 + self.rng.below(2) as usize;
            while acks.len() < k {
                let (_, line) = worker.expect_line();
                acks.push(ack_of(&line));
            }
            let wait = typical.mul_f64(0.5 + self.rng.below(1_000) as f64 / 1_000.0);
            std::thread::sleep(wait);
            format!("{} ms after ack {k}", wait.as_millis())
        };
        worker.child.kill().unwrap();
        let killed = Instant::now();
        let status = worker.child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "round {round}: the worker ended by itself ({status}); its stderr:\n{}",
            worker.stderr_text()
        );
        while let Some((_, line)) = worker.next_line(PATIENCE) {
            acks.push(ack_of(&line));
        }
        for (n, ack) in acks.iter().enumerate() {
            assert_eq!(
                ack.id,
                CopyId {
                    epoch,
                    seq: n as u64 + 1
                },
                "round {round}: acks {acks:?}"
            );
            let before = if n == 0 { ready_rows } else { acks[n - 1].rows };
            assert!(ack.rows >= before, "round {round}: rows went back: {acks:?}");
        }
        self.copy_ms.extend(acks.iter().map(|a| a.ms));
        self.acked += acks.len();

        let copies = self.inspect(round);
        let landing = self.landing(round, epoch, &acks, &copies);
        let staging = self.staging_of(pid);
        self.staging_left += staging;
        self.landings.push(landing);

        let inspected = Instant::now();
        let (restored, own) = self.take_over(round, epoch, acks.last().copied(), ready_rows, &copies);
        report(&format!(
            "{} round {round}: epoch {epoch} killed {plan}: {landing:?}, {} acked{}{}; \
             next holder restored {} ({} rows) and wrote {}/{}; worker {} ms, checks {} ms, next holder {} ms",
            self.name,
            acks.len(),
            acks.last()
                .map(|a| format!(" (last {}/{}, {} rows)", a.id.epoch, a.id.seq, a.rows))
                .unwrap_or_default(),
            if staging > 0 { format!(", {staging} staging file(s) left") } else { String::new() },
            restored.map_or("nothing".to_owned(), |id| format!("{}/{}", id.epoch, id.seq)),
            own.rows,
            own.id.epoch,
            own.id.seq,
            (killed - spawned).as_millis(),
            (inspected - killed).as_millis(),
            inspected.elapsed().as_millis(),
        ));
    }

    /// Checks every object not checked before and verifies every complete copy not verified
    /// before; returns the store's copies of this tenant.
    fn inspect(&mut self, round: u64) -> BTreeMap<CopyId, ListedCopy> {
        let prefix = tenant_prefix();
        let listed = self.store.list(&prefix).unwrap();
        if let Some(folder) = &self.folder {
            // On disk, nothing but listed objects beside real names.
            let keys: HashSet<&str> = listed.iter().map(|o| o.key.as_str()).collect();
            let mut stack = vec![folder.clone()];
            while let Some(dir) = stack.pop() {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let path = entry.unwrap().path();
                    let relative = path.strip_prefix(folder).unwrap().to_str().unwrap().to_owned();
                    if relative == ".staging" {
                        continue;
                    }
                    if path.is_dir() {
                        stack.push(path);
                    } else {
                        assert!(
                            keys.contains(relative.as_str()),
                            "round {round}: {relative} is in the store's folder but is no object"
                        );
                    }
                }
            }
        }
        let mut copies: BTreeMap<CopyId, ListedCopy> = BTreeMap::new();
        for object in &listed {
            let rest = &object.key[prefix.len()..];
            let parts: Vec<&str> = rest.split('/').collect();
            let number = |text: &str| {
                assert_eq!(text.len(), 20, "round {round}: {}", object.key);
                text.parse::<u64>().unwrap()
            };
            match parts[..] {
                [epoch, "tenure.json"] => {
                    number(epoch);
                    if self.checked.insert(object.key.clone()) {
                        let marker: serde_json::Value = serde_json::from_slice(&self.get(&object.key))
                            .unwrap_or_else(|e| panic!("round {round}: {} is not whole: {e}", object.key));
                        assert_eq!(marker["key"], key(), "{}", object.key);
                    }
                }
                [epoch, manifest] if manifest.ends_with(".json") => {
                    let id = CopyId {
                        epoch: number(epoch) as i64,
                        seq: number(manifest.strip_suffix(".json").unwrap()),
                    };
                    let copy = copies.entry(id).or_default();
                    if object.size == 0 {
                        copy.reserved = true;
                    } else {
                        copy.manifest = Some(object.key.clone());
                    }
                }
                [epoch, seq, "files", index] => {
                    let id = CopyId {
                        epoch: number(epoch) as i64,
                        seq: number(seq),
                    };
                    let number = index
                        .strip_suffix(".delta")
                        .or_else(|| index.strip_suffix(".carried"))
                        .unwrap_or(index);
                    assert!(
                        (number.len() == 6 && number.bytes().all(|b| b.is_ascii_digit())) || is_piece(number),
                        "round {round}: {}",
                        object.key
                    );
                    copies
                        .entry(id)
                        .or_default()
                        .files
                        .insert((*index).to_owned(), object.key.clone());
                }
                _ => panic!("round {round}: {} is no object of a copy", object.key),
            }
        }
        let mut newest_of_epoch: BTreeMap<i64, u64> = BTreeMap::new();
        for id in copies.keys() {
            newest_of_epoch.insert(id.epoch, id.seq);
        }
        let store = self.store.clone();
        let epoch_copies = EpochCopies::new(store);
        for (id, copy) in &copies {
            match &copy.manifest {
                Some(manifest_key) if !self.verified.contains(id) => {
                    let manifest: serde_json::Value = serde_json::from_slice(&self.get(manifest_key))
                        .unwrap_or_else(|e| panic!("round {round}: {manifest_key} is not whole: {e}"));
                    assert_eq!(manifest["key"], key(), "{manifest_key}");
                    assert_eq!(manifest["epoch"], id.epoch, "{manifest_key}");
                    assert_eq!(manifest["seq"], id.seq, "{manifest_key}");
                    let files = manifest["files"].as_array().unwrap();
                    if manifest["format_version"] == 1 {
                        assert_eq!(
                            copy.files.keys().cloned().collect::<Vec<_>>(),
                            (0..files.len()).map(|i| format!("{i:06}")).collect::<Vec<_>>(),
                            "round {round}: the objects of {id:?} are not the manifest's"
                        );
                        for (index, file) in files.iter().enumerate() {
                            let object = &copy.files[&format!("{index:06}")];
                            let bytes = self.get(object);
                            assert_eq!(Some(bytes.len() as u64), file["size"].as_u64(), "{object}");
                            assert_eq!(
                                cc::sha256_hex(&bytes),
                                file["sha256"].as_str().unwrap(),
                                "round {round}: {object} does not match its manifest"
                            );
                            self.checked.insert(object.clone());
                        }
                    } else {
                        // Formats 2 to 5: a file's base pieces and deltas may live in earlier
                        // copies of the lineage; those this copy stored must be here, whole, at
                        // their size (their digests are the verify below), and it stored nothing
                        // else: nothing the manifest carries inline (format 5) is stored too.
                        let own = format!("{:020}/{:020}/files/", id.epoch, id.seq);
                        let mut named = BTreeSet::new();
                        for file in files {
                            let deltas = file["deltas"].as_array().into_iter().flatten();
                            let pieces = file["base_pieces"].as_array().into_iter().flatten();
                            for part in [&file["base"], &file["delta"]]
                                .into_iter()
                                .chain(pieces)
                                .chain(deltas)
                            {
                                let Some(object) = part["object"].as_str() else {
                                    continue;
                                };
                                if part.get("inline").is_some() {
                                    continue;
                                }
                                let Some(name) = object.strip_prefix(&own) else {
                                    continue;
                                };
                                let stored = copy.files.get(name).unwrap_or_else(|| {
                                    panic!("round {round}: {id:?} names {object}, which is not there")
                                });
                                assert_eq!(
                                    Some(self.get(stored).len() as u64),
                                    part["size"].as_u64(),
                                    "round {round}: {stored}"
                                );
                                self.checked.insert(stored.clone());
                                named.insert(name.to_owned());
                            }
                        }
                        assert_eq!(
                            copy.files.keys().cloned().collect::<BTreeSet<_>>(),
                            named,
                            "round {round}: the objects of {id:?} are not the manifest's"
                        );
                    }
                    self.checked.insert(manifest_key.clone());
                    assert_eq!(
                        epoch_copies.verify(&key(), *id, Some(&fold)).unwrap(),
                        None,
                        "round {round}: complete copy {id:?} does not verify"
                    );
                    self.verified.insert(*id);
                }
                Some(_) => {}
                None => {
                    // A copy without its manifest does not exist, and only a writer killed
                    // in the middle of its last copy leaves one.
                    assert_eq!(
                        newest_of_epoch[&id.epoch], id.seq,
                        "round {round}: incomplete copy {id:?} is not the last of its epoch"
                    );
                    for object in copy.files.values() {
                        if self.checked.insert(object.clone()) {
                            let bytes = self.get(object);
                            self.check_whole(round, object, &bytes);
                        }
                    }
                }
            }
        }
        copies
    }

    fn get(&self, key: &str) -> Vec<u8> {
        self.store
            .get(key)
            .unwrap()
            .unwrap_or_else(|| panic!("{key} was listed but cannot be read"))
    }

    /// An object no manifest names must still be whole by its own header.
    fn check_whole(&self, round: u64, key: &str, bytes: &[u8]) {
        if is_piece(key) {
            check_piece(bytes).unwrap_or_else(|e| panic!("round {round}: {key}: {e}"));
        } else if cc::is_blob(bytes) {
            cc::check_blob(bytes).unwrap_or_else(|e| panic!("round {round}: {key}: {e}"));
        } else if cc::is_sqlite(bytes) {
            cc::check_sqlite_length(bytes).unwrap_or_else(|e| panic!("round {round}: {key}: {e}"));
            let image = self.work.path().join("image.db");
            std::fs::write(&image, bytes).unwrap();
            cc::check_ledger(&image).unwrap_or_else(|e| panic!("round {round}: {key}: {e}"));
            std::fs::remove_file(&image).unwrap();
        } else if key.ends_with(".delta") {
            check_delta(bytes).unwrap_or_else(|e| panic!("round {round}: {key}: {e}"));
        } else {
            panic!(
                "round {round}: {key} ({} bytes) is neither a blob nor a SQLite image",
                bytes.len()
            );
        }
    }

    fn landing(
        &self,
        round: u64,
        epoch: i64,
        acks: &[Ack],
        copies: &BTreeMap<CopyId, ListedCopy>,
    ) -> Landing {
        let last_acked = acks.last().map_or(0, |a| a.id.seq);
        let complete: Vec<u64> = copies
            .iter()
            .filter(|(id, c)| id.epoch == epoch && c.manifest.is_some())
            .map(|(id, _)| id.seq)
            .collect();
        let incomplete: Vec<u64> = copies
            .iter()
            .filter(|(id, c)| id.epoch == epoch && c.manifest.is_none() && !c.files.is_empty())
            .map(|(id, _)| id.seq)
            .collect();
        let reserved: Vec<u64> = copies
            .iter()
            .filter(|(id, c)| id.epoch == epoch && c.reserved)
            .map(|(id, _)| id.seq)
            .collect();
        let written = complete.len() as u64;
        assert_eq!(
            complete,
            (1..=written).collect::<Vec<_>>(),
            "round {round}: complete copies of epoch {epoch}"
        );
        // Every acknowledged copy is there; at most one more got its manifest unacknowledged.
        assert!(
            written == last_acked || written == last_acked + 1,
            "round {round}: {written} complete copies in epoch {epoch}, {last_acked} acknowledged"
        );
        assert!(
            incomplete.len() <= 1,
            "round {round}: incomplete copies {incomplete:?}"
        );
        // A name is reserved only for the copy after the last one written (or restored): an
        // empty manifest never stands where a copy was acknowledged.
        assert!(
            reserved.iter().all(|&seq| seq == written + 1),
            "round {round}: reserved {reserved:?} after {written} complete copies in epoch {epoch}"
        );
        match incomplete.first() {
            Some(&seq) => {
                assert_eq!(seq, written + 1, "round {round}: incomplete copy {seq}");
                Landing::InsideCopy
            }
            None if written > last_acked => Landing::AfterManifest,
            None => Landing::BetweenCopies,
        }
    }

    /// Staging files a killed worker left in the directory store (a kill during a put).
    fn staging_of(&self, pid: u64) -> usize {
        let Some(folder) = &self.folder else { return 0 };
        std::fs::read_dir(folder.join(".staging"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{pid}-"))
            })
            .count()
    }

    /// The next holder: takes the lease, restores, checks what it got, writes its own copy
    /// and hands the tenure on. Returns what it restored and what it wrote.
    fn take_over(
        &mut self,
        round: u64,
        worker_epoch: i64,
        last_ack: Option<Ack>,
        ready_rows: u64,
        copies: &BTreeMap<CopyId, ListedCopy>,
    ) -> (Option<CopyId>, Ack) {
        let leases = SqliteLeaseStore::open_with(
            &self.leases,
            SqliteOptions {
                clock: Arc::new(OffsetClock(Self::offset(round) + HOUR_MS)),
                ..SqliteOptions::default()
            },
        )
        .unwrap();
        let lease = TenantLease::acquire(LeaseOptions {
            key: key(),
            replica_id: format!("next-{round}"),
            store: Arc::new(leases),
            ttl_ms: TTL_MS,
            margin_ms: TTL_MS / 10,
            clock: Arc::new(SystemMonotonicClock),
        })
        .unwrap_or_else(|e| panic!("round {round}: the next holder cannot take the lease: {e}"));
        assert_eq!(lease.epoch(), worker_epoch + 1, "round {round}");
        let expected = copies
            .iter()
            .rev()
            .find(|(id, c)| c.manifest.is_some() && id.epoch < lease.epoch())
            .map(|(id, _)| *id);
        if let Some(ack) = last_ack {
            assert!(
                expected >= Some(ack.id),
                "round {round}: acknowledged {ack:?} but newest is {expected:?}"
            );
        }
        if let Some(previous) = self.handed_over {
            assert!(expected >= Some(previous.id), "round {round}");
        }

        let epoch_copies = EpochCopies::new(self.store.clone());
        let folder = self.work.path().join(format!("next{round}"));
        let root = tenant_root_for(&folder, ORG, TENANT).unwrap();
        let restored = epoch_copies
            .restore(&lease, &root, Some(&fold))
            .unwrap_or_else(|e| panic!("round {round}: the next holder cannot restore: {e}"));
        // A put the killed worker had already sent can land at an S3 server after the listing
        // above was taken; the restore may then take that newer copy, which a listing taken
        // now must show as the newest.
        let expected = if restored.restored == expected {
            expected
        } else {
            let newest = self
                .inspect(round)
                .iter()
                .rev()
                .find(|(id, c)| c.manifest.is_some() && id.epoch < lease.epoch())
                .map(|(id, _)| *id);
            assert!(
                newest > expected,
                "round {round}: listed {expected:?}, then {newest:?}; restored {restored:?}"
            );
            newest
        };
        assert_eq!(restored.restored, expected, "round {round}: {restored:?}");
        assert!(restored.skipped.is_empty(), "round {round}: {restored:?}");
        if expected.is_none() {
            // The first worker died before its first copy: an empty start, as it had.
            cc::start_empty(&root, self.pad_bytes, &mut self.rng).unwrap();
        }
        let state = cc::check_root(&root).unwrap_or_else(|e| panic!("round {round}: restored root: {e}"));
        assert!(
            state.rows >= ready_rows,
            "round {round}: {state:?} after {ready_rows} rows"
        );
        if let Some(ack) = last_ack {
            assert!(state.rows >= ack.rows, "round {round}: {state:?} after {ack:?}");
            if expected == Some(ack.id) {
                assert_eq!(
                    state.rows, ack.rows,
                    "round {round}: the acknowledged copy's rows"
                );
            }
        }
        // The operator's view takes the same copy (every fourth round: in a debug build the
        // hashing of each restore is most of a round's time).
        if round % 4 == 1 {
            let latest = epoch_copies
                .restore_latest(
                    &key(),
                    lease.forgotten_at_epoch(),
                    Some(lease.epoch()),
                    &folder.join("look"),
                    Some(&fold),
                )
                .unwrap();
            assert_eq!(latest.restored, expected, "round {round}: {latest:?}");
        }

        let written = epoch_copies
            .write_copy(&lease, &root)
            .unwrap_or_else(|e| panic!("round {round}: the next holder cannot write a copy: {e}"));
        assert_eq!(
            (written.id.epoch, written.id.seq),
            (lease.epoch(), 1),
            "round {round}"
        );
        lease.release().unwrap();
        let own = Ack {
            id: written.id,
            rows: state.rows,
            ms: 0.0,
        };
        self.handed_over = Some(own);
        (expected, own)
    }

    fn run(&mut self, rounds: u64, seed: u64) {
        let started = Instant::now();
        report(&format!(
            "{}: {rounds} rounds, seed {seed} (replay with GOTRY_COPY_CRASH_SEED={seed})",
            self.name
        ));
        for round in 1..=rounds {
            self.round(round);
        }
        // The last holder's own copy is checked like every other.
        self.inspect(rounds + 1);
        let count = |landing| self.landings.iter().filter(|l| **l == landing).count();
        let inside = count(Landing::InsideCopy);
        report(&format!(
            "{}: {rounds} kills: {inside} inside a copy ({:.0}%), {} after a manifest before its ack, {} between copies; \
             {} kills left a staging file; {} copies acknowledged, {} complete copies verified; typical copy {} ms; {:.1} s",
            self.name,
            100.0 * inside as f64 / rounds as f64,
            count(Landing::AfterManifest),
            count(Landing::BetweenCopies),
            self.staging_left,
            self.acked,
            self.verified.len(),
            self.typical_copy().as_millis(),
            started.elapsed().as_secs_f64(),
        ));
        assert!(
            inside > 0,
            "{}: no kill landed inside a copy (seed {seed}): the run did not exercise the window",
            self.name
        );
    }
}

/// A child that outlives the thread that started it would outlive a killed test run.
fn die_with_this_thread(command: &mut Command) {
    // SAFETY: prctl is async-signal-safe, and the closure touches nothing else.
    unsafe {
        command.pre_exec(|| match libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
}

#[test]
fn sigkill_during_directory_copies_never_leaves_a_copy_a_restore_would_take() {
    let seed = seed();
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("store");
    let url = format!("file://{}", folder.display());
    // A small state object: on a folder, storing it is quick and hashing a large one would
    // take most of the copy, outside the window.
    let mut run = Run::new("directory", url, Some(folder), seed, (4 << 20, 64 << 10));
    run.run(40, seed);
}

#[test]
fn sigkill_during_s3_copies_never_leaves_a_copy_a_restore_would_take() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let seed = seed() ^ 0x5_3000;
    let url = moto.url(&format!("copy-crash-{}", std::process::id()));
    // moto is a Python server: a smaller ledger keeps a copy near the directory's duration.
    // A large state object: on S3 its PUT takes most of the copy, inside the window.
    let mut run = Run::new("s3", url, None, seed, (2 << 20, 1 << 20));
    run.run(16, seed);
    drop(moto);
}

/// Whether `key` names a piece of a base larger than one piece (format 4): `<file>.<piece>`,
/// six digits each.
fn is_piece(key: &str) -> bool {
    let name = key.rsplit('/').next().unwrap_or(key);
    name.split_once('.').is_some_and(|(file, piece)| {
        [file, piece]
            .iter()
            .all(|part| part.len() == 6 && part.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Whether a piece of a ledger's base is whole as far as its own bytes tell (its content is
/// bound by the manifest's digest, which only a complete copy has): not empty, at most a piece,
/// and whole 4 KiB pages, as every piece of a database of such pages is.
fn check_piece(bytes: &[u8]) -> Result<(), String> {
    const PIECE: usize = 4 << 20;
    if bytes.is_empty() || bytes.len() > PIECE || !bytes.len().is_multiple_of(4096) {
        return Err(format!("a piece of {} bytes", bytes.len()));
    }
    Ok(())
}

/// Whether a delta (formats 2 to 4) is whole by its own header: `GTDELTA1`, the file's length, the
/// block count, strictly rising block indexes inside the file, then exactly their bytes (4 KiB
/// blocks, the file's last one possibly short). Its content is bound by the manifest's digest,
/// which only a complete copy has.
fn check_delta(bytes: &[u8]) -> Result<(), String> {
    const BLOCK: u64 = 4096;
    let word = |at: usize| {
        bytes
            .get(at..at + 8)
            .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
            .ok_or_else(|| format!("cut inside its header ({} bytes)", bytes.len()))
    };
    if !bytes.starts_with(b"GTDELTA1") {
        return Err("no delta header".to_owned());
    }
    let (len, count) = (word(8)?, word(16)?);
    let mut expected = 24 + 8 * count;
    let mut previous = None;
    for n in 0..count {
        let index = word(24 + 8 * n as usize)?;
        if previous.is_some_and(|p| p >= index) || index * BLOCK >= len {
            return Err(format!("block index {index} out of order or past the file"));
        }
        previous = Some(index);
        expected += BLOCK.min(len - index * BLOCK);
    }
    if expected != bytes.len() as u64 {
        return Err(format!("{} bytes where its header says {expected}", bytes.len()));
    }
    Ok(())
}
