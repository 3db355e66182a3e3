//! Writing and restoring a copy of a tenant root, against the raw cost of the same bytes in
//! the same run: on the directory backend, the files copied and flushed (and read back and
//! flushed for a restore); on S3, the same objects put and got through the store without
//! the copies' layer. Each round times ours and raw back to back, which one first alternating,
//! so a noisy neighbour slows both; the ratio printed is raw time / our time (1.0: as fast as
//! the raw bytes; target at least 0.8 from 16 MB up), the median and the range of the rounds.
//! Roots of 1, 16 and 128 MB: a SQLite ledger plus a few files.
//!
//!     cargo bench -p gotry-tenant-state --bench copies
//!
//! With `GOTRY_MOTO_SERVER` set (see scripts/s3-server.sh) the S3 rows run too.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use gotry_tenant_state::{
    open_durable_store, DirectoryDurableStore, DurableStore, EpochCopies, LeaseOptions, ManualClock,
    SqliteLeaseStore, TenantLease,
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

/// Prints the ratios of one backend at every size.
fn ratios(backend: &str, open: &dyn Fn(&Path, usize) -> Arc<dyn DurableStore>) {
    for (mb, rounds) in [(1usize, 9usize), (16, 9), (128, 5)] {
        let work = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let root = work.path().join("root");
        make_root(&root, mb);
        let store = open(work.path(), mb);
        let copies = EpochCopies::new(store.clone());
        let lease = holder(work.path());
        let (mut write, mut restore) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let raw_first = round % 2 == 1;
            write.push(paired(
                raw_first,
                || {
                    copies.write_copy(&lease, &root).unwrap();
                },
                || match backend {
                    "directory" => raw_dir_copy(&root, &work.path().join(format!("raw-{round}"))),
                    _ => raw_s3_put(&*store, &root, round),
                },
            ));
            let into = work.path().join(format!("restored-{round}"));
            restore.push(paired(
                raw_first,
                || {
                    copies.restore_latest(&key(), 0, None, &into, None).unwrap();
                },
                || match backend {
                    "directory" => raw_dir_copy(
                        &work.path().join(format!("raw-{round}")),
                        &work.path().join(format!("raw-back-{round}")),
                    ),
                    _ => raw_s3_get(
                        &*store,
                        &root,
                        round,
                        &work.path().join(format!("raw-back-{round}")),
                    ),
                },
            ));
        }
        println!(
            "copies {backend:>9} {mb:>4} MB: write {} x raw throughput, restore {} x (median of {rounds})",
            summary(write),
            summary(restore)
        );
    }
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
    ratios("directory", &|dir, _| {
        Arc::new(DirectoryDurableStore::open(dir.join("durable")).unwrap())
    });
    match moto() {
        Some(server) => ratios("s3", &|_, mb| {
            open_durable_store(&format!(
                "s3://test:test@bench/r{mb}?endpoint=http://127.0.0.1:{}&region=us-east-1&timeout_ms=60000",
                server.1
            ))
            .unwrap()
        }),
        None => println!("copies s3: SKIPPED (GOTRY_MOTO_SERVER is not set; see scripts/s3-server.sh)"),
    }
    Criterion::default().configure_from_args().final_summary();
}
