//! The baseline of `bench/store.mjs`: the same acquire, renew, release cycle on a file store,
//! called on the core directly, so the package's figure is read as a ratio to this one
//! measured in the same run on the same disk.
//!
//! Usage: `store_ops <store file> <cycles>`; prints the operations per second.

use std::time::Instant;

use gotry_tenant_state::{LeaseStore, SqliteLeaseStore};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(cycles)) = (args.next(), args.next()) else {
        eprintln!("usage: store_ops <store file> <cycles>");
        std::process::exit(2);
    };
    let cycles: u32 = cycles.parse().expect("cycles is a number");
    let store = SqliteLeaseStore::open(&path).expect("the store opens");
    let start = Instant::now();
    for _ in 0..cycles {
        let grant = store.acquire("bench", "replica", 1_000).expect("acquire");
        store
            .renew("bench", "replica", grant.record.epoch, 1_000)
            .expect("renew");
        store
            .release("bench", "replica", grant.record.epoch)
            .expect("release");
    }
    let seconds = start.elapsed().as_secs_f64();
    println!("{:.1}", f64::from(cycles * 3) / seconds);
}
