//! A Rust contention worker: hammers one store with random lease operations for a while
//! and writes every acknowledged operation to its acknowledgement file.
//!
//! `lease-worker --store URL_OR_FILE --owner NAME --keys N --ttl-ms TTL --duration-ms D --acks FILE [--seed S]`
//!
//! The other languages' workers follow the same plan, so one auditor checks them all:
//! pause up to 4 ms, pick a key at random; acquire it when this worker holds no epoch of it, otherwise renew,
//! release or mark it forgotten. Refusals and contention are expected and counted; any
//! other failure ends the worker with status 1.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use gotry_tenant_harness::Flags;
use gotry_tenant_state::{open_lease_store, Error, LeaseOp};

struct Args {
    store: String,
    owner: String,
    keys: u64,
    ttl_ms: i64,
    duration: Duration,
    acks: String,
    seed: u64,
}

fn parse() -> Result<Args, String> {
    let flags = Flags::from_args()?;
    let number = |name: &str| -> Result<u64, String> {
        flags
            .text(name)?
            .parse()
            .map_err(|_| format!("--{name} must be a whole number"))
    };
    let store = flags.text("store")?;
    Ok(Args {
        store: if store.contains("://") {
            store
        } else {
            format!("sqlite://{store}")
        },
        owner: flags.text("owner")?,
        keys: number("keys")?.max(1),
        ttl_ms: i64::try_from(number("ttl-ms")?).map_err(|_| "--ttl-ms is too large")?,
        duration: Duration::from_millis(number("duration-ms")?),
        acks: flags.text("acks")?,
        seed: flags
            .get("seed")
            .map_or(Ok(u64::from(std::process::id())), |_| number("seed"))?,
    })
}

/// xorshift64*: enough randomness to interleave workers, and reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn main() -> ExitCode {
    match parse().and_then(|args| run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("lease-worker: {message}");
            ExitCode::from(1)
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let store = open_lease_store(&args.store).map_err(|e| e.to_string())?;
    let mut acks = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.acks)
        .map_err(|e| format!("{}: {e}", args.acks))?;
    let mut rng = Rng(args.seed | 1);
    let mut held: HashMap<String, i64> = HashMap::new();
    let (mut granted, mut refused, mut busy) = (0u64, 0u64, 0u64);
    let started = Instant::now();
    while started.elapsed() < args.duration {
        // A short random pause between calls: without it the worker that just committed
        // takes the write lock again before the waiting ones wake, and starves them.
        std::thread::sleep(Duration::from_micros(rng.next() % 4_000));
        let key = format!("k{}", rng.next() % args.keys);
        let owner = args.owner.as_str();
        let outcome = match held.get(&key).copied() {
            None => store
                .acquire(&key, owner, args.ttl_ms)
                .map(|g| (LeaseOp::Acquire, g.record.epoch)),
            Some(epoch) => match rng.next() % 4 {
                0 | 1 => store
                    .renew(&key, owner, epoch, args.ttl_ms)
                    .map(|_| (LeaseOp::Renew, epoch)),
                2 => store
                    .release(&key, owner, epoch)
                    .map(|_| (LeaseOp::Release, epoch)),
                _ => store
                    .mark_forgotten(&key, owner, epoch)
                    .map(|_| (LeaseOp::Forget, epoch)),
            },
        };
        match outcome {
            Ok((op, epoch)) => {
                // Written and flushed before the next operation: a worker killed after this
                // line may lose nothing it was told.
                writeln!(acks, "{}", gotry_tenant_harness::ack_line(&key, op, owner, epoch))
                    .and_then(|()| acks.flush())
                    .map_err(|e| format!("{}: {e}", args.acks))?;
                granted += 1;
                match op {
                    LeaseOp::Acquire => {
                        held.insert(key, epoch);
                    }
                    LeaseOp::Release => {
                        held.remove(&key);
                    }
                    LeaseOp::Renew | LeaseOp::Forget => {}
                }
            }
            Err(Error::LeaseHeld { .. }) => refused += 1,
            Err(Error::LeaseLost { .. }) => {
                refused += 1;
                held.remove(&key);
            }
            Err(Error::LeaseStoreUnavailable { .. }) => busy += 1,
            Err(other) => return Err(format!("{key}: unexpected failure: {other}")),
        }
    }
    println!(
        "lease-worker {}: granted={granted} refused={refused} unavailable={busy}",
        args.owner
    );
    Ok(())
}
