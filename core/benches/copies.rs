//! Writing and restoring copies of a tenant root, against the raw cost of the same bytes in
//! the same run: on the directory backend, the files copied and flushed (and read back and
//! flushed for a restore); on S3, the same objects put and got through the store without
//! the copies' layer. Paired rounds time ours and raw back to back, which one first
//! alternating, so a noisy neighbour slows both; a ratio printed is raw time / our time (1.0:
//! as fast as the raw bytes), the median and the range of the rounds.
//!
//! Per root size (1, 16 and 128 MB, and 1 GB on the directory with `GOTRY_BENCH_1G=1`; a
//! SQLite ledger plus a few files): the bytes and PUTs a copy after a one-row change sends to
//! the store (manifest included) and its time; a restore of such a copy (a base and a delta)
//! against raw; a first copy (nothing to reuse) against raw. Then the same ledger held open
//! by the host in WAL mode, as gotry's host keeps it for a tenure: a copy after each one-row
//! insert (read from the WAL's frames since the last copy) against the insert alone.
//!
//!     cargo bench -p gotry-tenant-state --bench copies
//!
//! With `GOTRY_MOTO_SERVER` set (see scripts/s3-server.sh) the S3 rows run too.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use gotry_tenant_state::{
    open_durable_store, same_library_snapshot, DirectoryDurableStore, DurableStore, EpochCopies,
    LeaseOptions, ManualClock, ObjectInfo, PutOutcome, SqliteLeaseStore, TenantLease,
};

const ORG: &str = "bench";
const TENANT: &str = "t-0123456789abcdef0123456789abcdef";

fn key() -> String {
    format!("{ORG}/{TENANT}")
}

/// A tenant root of about `mb` MiB: seven eighths a ledger, the rest in three files.
fn make_root(root: &Path, mb: usize) {
    let ledger = root.join("gotry-state/gotry-state.db");
    fs::create_dir_all(ledger.parent().unwrap()).unwrap();
    let db = rusqlite::Connection::open(&ledger).unwrap();
    db.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE entries (body BLOB);")
        .unwrap();
    let rows = mb * 7 * 1024 / 8 / 4;
    db.execute_batch("BEGIN").unwrap();
    for _ in 0..rows {
        db.execute("INSERT INTO entries VALUES (randomblob(4000))", [])
            .unwrap();
    }
    db.execute_batch("COMMIT; PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    for n in 0..3 {
        let bytes: Vec<u8> = (0..mb * 1024 * 1024 / 24).map(|i| (i * 31 + n) as u8).collect();
        fs::create_dir_all(root.join("files")).unwrap();
        fs::write(root.join(format!("files/f{n}.bin")), bytes).unwrap();
    }
}

fn files_of(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn write_synced(path: &Path, bytes: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut file = File::create(path).unwrap();
    file.write_all(bytes).unwrap();
    file.sync_data().unwrap();
    File::open(path.parent().unwrap()).unwrap().sync_all().unwrap();
}

/// The raw side on a directory: every file copied into a fresh folder and flushed.
fn raw_dir_copy(from: &Path, to: &Path) {
    for file in files_of(from) {
        let bytes = fs::read(&file).unwrap();
        write_synced(&to.join(file.strip_prefix(from).unwrap()), &bytes);
    }
}

/// The raw side on S3: every file put as one object, or got back.
fn raw_s3_put(store: &dyn DurableStore, from: &Path, round: usize) {
    for (n, file) in files_of(from).iter().enumerate() {
        store
            .put_new(&format!("raw/{round}/{n}"), &fs::read(file).unwrap())
            .unwrap();
    }
}

fn raw_s3_get(store: &dyn DurableStore, from: &Path, round: usize, to: &Path) {
    for n in 0..files_of(from).len() {
        let bytes = store.get(&format!("raw/{round}/{n}")).unwrap().unwrap();
        write_synced(&to.join(format!("{n}")), &bytes);
    }
}

fn holder(dir: &Path) -> TenantLease {
    TenantLease::acquire(LeaseOptions {
        key: key(),
        replica_id: "bench".into(),
        store: Arc::new(SqliteLeaseStore::open(dir.join("leases.db")).unwrap()),
        ttl_ms: 600_000,
        margin_ms: 1_000,
        clock: Arc::new(ManualClock::new(0)),
    })
    .unwrap()
}

struct Moto(Child, u16);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn moto() -> Option<Moto> {
    let server = std::env::var_os("GOTRY_MOTO_SERVER").filter(|s| !s.is_empty())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Owned by the guard at once, so every way out of here stops the server.
    let server = Moto(
        Command::new(server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        port,
    );
    for _ in 0..200 {
        if let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            let request = format!("PUT /bench HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).unwrap();
            let mut answer = String::new();
            let _ = std::io::Read::read_to_string(&mut stream, &mut answer);
            if answer.starts_with("HTTP/1.1 200") {
                return Some(server);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("moto did not start on port {port}");
}

/// The median of the rounds' ratios and their range: on a shared machine one round can be
/// off by half either way, so the range says how far the median can be trusted.
fn summary(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    format!(
        "{:.2} (rounds {:.2}-{:.2})",
        values[values.len() / 2],
        values[0],
        values[values.len() - 1]
    )
}

/// Raw time over our time for one round; which side runs first alternates between rounds,
/// so neither always meets the page cache or the disk's journal in the state the other left.
fn paired(raw_first: bool, ours: impl FnOnce(), raw: impl FnOnce()) -> f64 {
    fn time(f: impl FnOnce()) -> f64 {
        let started = Instant::now();
        f();
        started.elapsed().as_secs_f64()
    }
    let (ours, raw) = if raw_first {
        let raw = time(raw);
        (time(ours), raw)
    } else {
        let ours = time(ours);
        (ours, time(raw))
    };
    raw / ours
}

/// The store as the copies see it, counting what they create: every PUT and its bytes,
/// pieces and manifest alike.
#[derive(Debug)]
struct Counting {
    inner: Arc<dyn DurableStore>,
    puts: AtomicUsize,
    bytes: AtomicU64,
}

impl Counting {
    fn over(inner: Arc<dyn DurableStore>) -> Arc<Counting> {
        Arc::new(Counting {
            inner,
            puts: AtomicUsize::new(0),
            bytes: AtomicU64::new(0),
        })
    }

    /// PUTs and bytes since the last call.
    fn take(&self) -> (usize, u64) {
        (
            self.puts.swap(0, Ordering::SeqCst),
            self.bytes.swap(0, Ordering::SeqCst),
        )
    }
}

impl DurableStore for Counting {
    fn put_new(&self, key: &str, bytes: &[u8]) -> gotry_tenant_state::Result<PutOutcome> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        self.bytes.fetch_add(bytes.len() as u64, Ordering::SeqCst);
        self.inner.put_new(key, bytes)
    }
    fn get(&self, key: &str) -> gotry_tenant_state::Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }
    fn get_parts(
        &self,
        key: &str,
        take: &mut dyn FnMut(&[u8]) -> gotry_tenant_state::Result<bool>,
    ) -> gotry_tenant_state::Result<bool> {
        self.inner.get_parts(key, take)
    }
    fn list(&self, prefix: &str) -> gotry_tenant_state::Result<Vec<ObjectInfo>> {
        self.inner.list(prefix)
    }
    fn list_after(&self, prefix: &str, after: &str) -> gotry_tenant_state::Result<Vec<ObjectInfo>> {
        self.inner.list_after(prefix, after)
    }
    fn delete(&self, key: &str) -> gotry_tenant_state::Result<()> {
        self.inner.delete(key)
    }
    fn delete_all(&self, keys: &[String]) -> gotry_tenant_state::Result<()> {
        self.inner.delete_all(keys)
    }
    fn reserve(&self, key: &str) {
        self.inner.reserve(key)
    }

    fn location(&self) -> String {
        self.inner.location()
    }
    fn answers_at_once(&self) -> bool {
        self.inner.answers_at_once()
    }
}

/// One small row committed to the ledger, which is closed again (its WAL checkpointed), as a
/// host that opens the ledger per call leaves it.
fn one_row(root: &Path) {
    let db = rusqlite::Connection::open(root.join("gotry-state/gotry-state.db")).unwrap();
    db.execute("INSERT INTO entries VALUES (randomblob(100))", [])
        .unwrap();
}

fn seconds(f: impl FnOnce()) -> f64 {
    let started = Instant::now();
    f();
    started.elapsed().as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Prints, for one backend at every size: what a copy after a one-row change uploads (PUTs
/// and bytes, manifest included) and how long it takes; a restore of such a copy (a base and
/// a delta) against the raw bytes read back and written durably; and a first copy (nothing to
/// reuse) against the raw bytes stored.
fn ratios(backend: &str, open: &dyn Fn(&Path, &str) -> Arc<dyn DurableStore>) {
    let mut sizes = vec![(1usize, 7usize), (16, 7), (128, 3)];
    // moto keeps every object in memory: a gigabyte root's stores would need several there.
    if backend == "directory" && std::env::var_os("GOTRY_BENCH_1G").is_some() {
        sizes.push((1024, 1));
    }
    for (mb, rounds) in sizes {
        let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let root = work.path().join("root");
        make_root(&root, mb);
        let lease = holder(work.path());
        let size: u64 = files_of(&root)
            .iter()
            .map(|f| fs::metadata(f).unwrap().len())
            .sum();

        // A first copy, each round into a store of its own, against the same bytes stored raw.
        let mut first = Vec::new();
        for round in 0..rounds {
            let fresh = EpochCopies::new(open(work.path(), &format!("first-{mb}-{round}")));
            let raw_store = open(work.path(), &format!("raw-first-{mb}-{round}"));
            first.push(paired(
                round % 2 == 1,
                || {
                    fresh.write_copy(&lease, &root).unwrap();
                },
                || match backend {
                    "directory" => raw_dir_copy(&root, &work.path().join(format!("raw-first-{round}"))),
                    _ => raw_s3_put(&*raw_store, &root, round),
                },
            ));
            let _ = fs::remove_dir_all(work.path().join(format!("raw-first-{round}")));
            let _ = fs::remove_dir_all(work.path().join(format!("first-{mb}-{round}")));
            let _ = fs::remove_dir_all(work.path().join(format!("raw-first-{mb}-{round}")));
        }

        // The lineage: a first copy, then one row and one copy per round.
        let store = Counting::over(open(work.path(), &format!("lineage-{mb}")));
        let copies = EpochCopies::new(store.clone());
        copies.write_copy(&lease, &root).unwrap();
        let raw_store = open(work.path(), &format!("raw-{mb}"));
        match backend {
            "directory" => raw_dir_copy(&root, &work.path().join("raw")),
            _ => raw_s3_put(&*raw_store, &root, 0),
        }
        store.take();
        let (mut times, mut puts, mut bytes, mut restore) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            one_row(&root);
            let mut written = None;
            times.push(seconds(|| {
                written = Some(copies.write_copy(&lease, &root).unwrap())
            }));
            let (n, b) = store.take();
            let written = written.unwrap();
            assert_eq!(n, written.pieces_uploaded + 1, "the pieces and the manifest");
            puts.push(n as f64);
            bytes.push(b as f64);
            let into = work.path().join(format!("restored-{round}"));
            let raw_into = work.path().join(format!("raw-back-{round}"));
            restore.push(paired(
                round % 2 == 1,
                || {
                    copies.restore_latest(&key(), 0, None, &into, None).unwrap();
                },
                || match backend {
                    "directory" => raw_dir_copy(&work.path().join("raw"), &raw_into),
                    _ => raw_s3_get(&*raw_store, &root, 0, &raw_into),
                },
            ));
            let _ = fs::remove_dir_all(&into);
            let _ = fs::remove_dir_all(&raw_into);
        }
        println!(
            "copies {backend:>9} {mb:>4} MB (root {:.1} MB): one-row copy {:.0} B in {:.0} PUTs, {:.1} ms; \
             restore {} x raw; first copy {} x raw (median of {rounds})",
            size as f64 / (1 << 20) as f64,
            median(bytes),
            median(puts),
            median(times) * 1000.0,
            summary(restore),
            summary(first),
        );
        held(
            backend,
            &root,
            &lease,
            Counting::over(open(work.path(), &format!("held-{mb}"))),
            mb,
        );
    }
}

/// The root's ledger held open in WAL mode by the host (this process, on the library's own
/// SQLite, so the same-library snapshot function is safe): per round, one row inserted through
/// the held connection, then a copy; the copy's time against the insert's, and what it stored.
fn held(backend: &str, root: &Path, lease: &TenantLease, store: Arc<Counting>, mb: usize) {
    let host = rusqlite::Connection::open(root.join("gotry-state/gotry-state.db")).unwrap();
    host.execute_batch("PRAGMA journal_mode = WAL").unwrap();
    let copies = EpochCopies::new(store.clone()).with_host_snapshot(Some(same_library_snapshot()));
    let insert = || {
        host.execute("INSERT INTO entries VALUES (randomblob(100))", [])
            .unwrap();
    };
    insert();
    copies.write_copy(lease, root).unwrap();
    store.take();
    let (mut inserts, mut times, mut puts, mut bytes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..21 {
        inserts.push(seconds(insert));
        times.push(seconds(|| {
            copies.write_copy(lease, root).unwrap();
        }));
        let (n, b) = store.take();
        puts.push(n as f64);
        bytes.push(b as f64);
    }
    let (insert, copy) = (median(inserts), median(times));
    println!(
        "copies {backend:>9} {mb:>4} MB held in WAL mode: one-row copy {:.0} B in {:.0} PUTs, {:.2} ms; \
         the insert alone {:.3} ms; insert and copy {:.1} x the insert (median of 21)",
        median(bytes),
        median(puts),
        copy * 1000.0,
        insert * 1000.0,
        (insert + copy) / insert,
    );
}

fn copies(c: &mut Criterion) {
    let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = work.path().join("root");
    make_root(&root, 16);
    let store: Arc<dyn DurableStore> =
        Arc::new(DirectoryDurableStore::open(work.path().join("durable")).unwrap());
    let copies = EpochCopies::new(store);
    let lease = holder(work.path());
    let mut group = c.benchmark_group("copies (directory, 16 MB root)");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Bytes(16 << 20));
    group.bench_function("write_copy", |b| {
        b.iter(|| copies.write_copy(&lease, &root).unwrap())
    });
    let mut n = 0;
    group.bench_function("restore", |b| {
        b.iter(|| {
            n += 1;
            copies
                .restore_latest(&key(), 0, None, &work.path().join(format!("into-{n}")), None)
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, copies);

fn main() {
    benches();
    ratios("directory", &|dir, name| {
        Arc::new(DirectoryDurableStore::open(dir.join(name)).unwrap())
    });
    match moto() {
        Some(server) => ratios("s3", &|_, name| {
            open_durable_store(&format!(
                "s3://test:test@bench/{name}?endpoint=http://127.0.0.1:{}&region=us-east-1&timeout_ms=60000",
                server.1
            ))
            .unwrap()
        }),
        None => println!("copies s3: SKIPPED (GOTRY_MOTO_SERVER is not set; see scripts/s3-server.sh)"),
    }
    Criterion::default().configure_from_args().final_summary();
}
