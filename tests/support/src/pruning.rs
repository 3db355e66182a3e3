//! The log-pruning scenario the server stores are held to, one function for every store: the
//! rule (prune as the writes go, keep every acquire, release, forget and each tenure's last
//! renewal) is one, so its proof is too.

use std::time::{Duration, Instant};

use gotry_tenant_state::{LeaseOp, LeaseStore, ManualClock};

/// Where the scenario's clock starts.
pub const START: i64 = 1_700_000_000_000;

/// The log of `key`, as (operation, epoch) pairs in order.
pub fn ops_of(store: &dyn LeaseStore, key: &str) -> Vec<(LeaseOp, i64)> {
    store
        .history(Some(key))
        .unwrap()
        .into_iter()
        .map(|e| (e.op, e.epoch))
        .collect()
}

/// Three hundred seconds of a keeper's rounds on `clock` (which reads [`START`]) over ten
/// tenures, with a forget, a release and a second holder among them, on a store that keeps
/// renewals for 60 s: the writes prune as they go, so nothing is left for `compact_log`, and
/// what stays is every acquire, release and forget, the last renewal of each ended tenure and
/// the renewals of the retention.
pub fn writes_keep_pace_with_pruning(store: &dyn LeaseStore, clock: &ManualClock) {
    let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
    for key in &keys {
        store.acquire(key, "a", 30_000).unwrap();
    }
    let mut written = keys.len();
    // k0's tenure stops renewing at round 10; k1 is released at round 12 and taken by b at
    // round 13; k2 is forgotten at round 5; the others go on. A round every ten seconds.
    for round in 1..=30 {
        clock.advance(10_000).unwrap();
        let batch: Vec<(&str, i64)> = keys
            .iter()
            .filter(|key| match key.as_str() {
                "k0" => round <= 10,
                "k1" => round <= 11,
                _ => true,
            })
            .map(|key| (key.as_str(), 1))
            .collect();
        for answer in store.renew_batch("a", 30_000, &batch).unwrap() {
            answer.unwrap();
        }
        written += batch.len();
        let single = match round {
            5 => store.mark_forgotten("k2", "a", 1).map(|_| ()),
            12 => store.release("k1", "a", 1).map(|_| ()),
            13 => store.acquire("k1", "b", 30_000).map(|_| ()),
            r if r > 13 => store.renew("k1", "b", 2, 30_000).map(|_| ()),
            _ => continue,
        };
        single.unwrap();
        written += 1;
    }
    let history = store.history(None).unwrap();
    println!(
        "lease log: {written} rows written over 300 s, {} kept with a retention of 60 s",
        history.len()
    );
    let count = |op: LeaseOp| history.iter().filter(|e| e.op == op).count();
    assert_eq!(
        (
            count(LeaseOp::Acquire),
            count(LeaseOp::Release),
            count(LeaseOp::Forget)
        ),
        (11, 1, 1)
    );
    // The end of k0's tenure and of k1's first, however old; for the rest, the renewals
    // of the retention (the last write judged up to 60 s before it: rounds 24 to 30).
    assert_eq!(ops_of(store, "k0"), [(LeaseOp::Acquire, 1), (LeaseOp::Renew, 1)]);
    let k1 = ops_of(store, "k1");
    assert_eq!(
        k1[..4],
        [
            (LeaseOp::Acquire, 1),
            (LeaseOp::Renew, 1),
            (LeaseOp::Release, 1),
            (LeaseOp::Acquire, 2)
        ],
        "{k1:?}"
    );
    assert_eq!(k1[4..], vec![(LeaseOp::Renew, 2); 7], "{k1:?}");
    let k0_last = history.iter().rfind(|e| e.key == "k0").unwrap();
    assert_eq!(k0_last.at_ms, START + 100_000);
    for key in &keys[2..] {
        let renewals = ops_of(store, key)
            .iter()
            .filter(|(op, _)| *op == LeaseOp::Renew)
            .count();
        assert_eq!(renewals, 7, "{key}");
    }
    assert_eq!(store.compact_log().unwrap(), 0, "the writes kept pace");
}

/// Another session holds the pruning mark (`mark(true)` takes it, `mark(false)` lets it go): a
/// write neither waits for it nor prunes, and the first write after it is let go prunes.
pub fn a_held_mark_is_passed_over(store: &dyn LeaseStore, clock: &ManualClock, mark: &mut dyn FnMut(bool)) {
    mark(true);
    clock.advance(120_000).unwrap();
    let rows = store.history(None).unwrap().len();
    let started = Instant::now();
    store.acquire("k0", "c", 30_000).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(store.history(None).unwrap().len(), rows + 1);
    mark(false);
    store.renew("k0", "c", 2, 30_000).unwrap();
    assert!(store.history(None).unwrap().len() < rows, "the next write pruned");
}
