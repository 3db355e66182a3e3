//! The LeaseStore contract as one test suite that any store runs against itself: every
//! store of the core, and any later backend, through the public API alone.
//!
//! The scenarios are the shared vectors in `tests/vectors/store-scenarios.json` (their
//! expectations come from an independent model, not from this crate), played on a manual
//! clock; the rest are properties that only threads can show.

use std::sync::{Arc, Barrier};

use serde_json::{json, Value};

use gotry_tenant_state::{Error, HistoryEntry, LeaseGrant, LeaseOp, LeaseRecord, LeaseStore, ManualClock};

/// Builds a fresh, empty store deciding on the given clock.
pub type MakeStore<'a> = &'a dyn Fn(Arc<ManualClock>) -> Arc<dyn LeaseStore>;

pub fn run_all(make: MakeStore<'_>) {
    scenarios(make);
    racing_acquires_grant_one_epoch_each(make);
    batched_renewals_answer_each_lease(make);
    closed_store_is_unavailable(make);
}

fn record_json(record: &LeaseRecord) -> Value {
    json!({
        "key": record.key, "owner": record.owner, "epoch": record.epoch,
        "lease_until_ms": record.lease_until_ms, "forgotten_at_epoch": record.forgotten_at_epoch,
    })
}

fn history_json(entries: &[HistoryEntry]) -> Value {
    Value::Array(
        entries
            .iter()
            .map(|e| json!({"key": e.key, "op": e.op.as_str(), "owner": e.owner, "epoch": e.epoch, "at_ms": e.at_ms}))
            .collect(),
    )
}

/// The observable outcome of a call, in the vectors' spelling.
fn outcome(result: Result<Value, Error>) -> Value {
    match result {
        Ok(value) => value,
        Err(Error::LeaseHeld { record }) => {
            json!({"error": "GOTRY_TENANT_LEASE_HELD", "record": record_json(&record)})
        }
        Err(Error::InvalidArgument { .. }) => json!({"error": "INVALID_ARGUMENT"}),
        Err(other) => json!({"error": other.code_str()}),
    }
}

fn text<'a>(step: &'a Value, name: &str) -> &'a str {
    step[name]
        .as_str()
        .unwrap_or_else(|| panic!("step {step} lacks {name}"))
}

fn int(step: &Value, name: &str) -> i64 {
    step[name]
        .as_i64()
        .unwrap_or_else(|| panic!("step {step} lacks {name}"))
}

fn play(store: &dyn LeaseStore, step: &Value) -> Value {
    let key = step["key"].as_str();
    let grant = |g: LeaseGrant| json!({"record": record_json(&g.record), "ttl_ms": g.ttl_ms});
    let record = |r: LeaseRecord| json!({"record": record_json(&r)});
    outcome(match text(step, "call") {
        "read" => store
            .read(text(step, "key"))
            .map(|r| json!({"record": r.as_ref().map(record_json)})),
        "acquire" => store
            .acquire(text(step, "key"), text(step, "owner"), int(step, "ttl_ms"))
            .map(grant),
        "renew" => store
            .renew(
                text(step, "key"),
                text(step, "owner"),
                int(step, "epoch"),
                int(step, "ttl_ms"),
            )
            .map(grant),
        "release" => store
            .release(text(step, "key"), text(step, "owner"), int(step, "epoch"))
            .map(record),
        "mark_forgotten" => store
            .mark_forgotten(text(step, "key"), text(step, "owner"), int(step, "epoch"))
            .map(record),
        "history" => store.history(key).map(|h| json!({"history": history_json(&h)})),
        other => panic!("unknown call {other}"),
    })
}

fn scenarios(make: MakeStore<'_>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../vectors/store-scenarios.json");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("vectors")).expect("json");
    let scenarios = all.as_array().expect("a list of scenarios");
    assert!(scenarios.len() >= 10, "the vectors lost their scenarios");
    for scenario in scenarios {
        let clock = Arc::new(ManualClock::new(int(scenario, "start_ms")));
        let store = make(Arc::clone(&clock));
        for (index, step) in scenario["steps"].as_array().expect("steps").iter().enumerate() {
            if let Some(ms) = step["advance_ms"].as_i64() {
                clock.advance(ms).expect("clock");
                continue;
            }
            let got = play(store.as_ref(), step);
            assert_eq!(
                got, step["expect"],
                "scenario {:?}, step {index}: {step}",
                scenario["name"]
            );
        }
        store.close().expect("close");
    }
}

/// Eight threads race for one free key at every round: exactly one wins each epoch, the
/// others see LEASE_HELD naming the winner.
fn racing_acquires_grant_one_epoch_each(make: MakeStore<'_>) {
    let clock = Arc::new(ManualClock::new(5_000));
    let store = make(Arc::clone(&clock));
    for round in 1..=5 {
        let barrier = Arc::new(Barrier::new(8));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (store, barrier) = (Arc::clone(&store), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    store.acquire("race", &format!("r{i}"), 1_000)
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().expect("thread")).collect();
        let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        assert_eq!(winners[0].record.epoch, round);
        for refused in results.iter().filter_map(|r| r.as_ref().err()) {
            match refused {
                Error::LeaseHeld { record } => assert_eq!(record, &winners[0].record),
                other => panic!("round {round}: {other:?}"),
            }
        }
        clock.advance(1_000).expect("clock");
    }
    assert_eq!(store.history(Some("race")).expect("history").len(), 5);
    store.close().expect("close");
}

fn closed_store_is_unavailable(make: MakeStore<'_>) {
    let store = make(Arc::new(ManualClock::new(0)));
    store.acquire("k", "o", 1_000).expect("acquire");
    store.close().expect("close");
    store.close().expect("closing twice is harmless");
    assert!(matches!(
        store.read("k"),
        Err(Error::LeaseStoreUnavailable { .. })
    ));
    assert!(matches!(
        store.acquire("k", "o", 1_000),
        Err(Error::LeaseStoreUnavailable { .. })
    ));
}

/// A batch answers every lease on its own and logs only what it granted.
fn batched_renewals_answer_each_lease(make: MakeStore<'_>) {
    let clock = Arc::new(ManualClock::new(10_000));
    let store = make(Arc::clone(&clock));
    store.acquire("expired", "me", 100).expect("acquire");
    clock.advance(100).expect("clock");
    store.acquire("held", "me", 1_000).expect("acquire");
    store.acquire("theirs", "them", 1_000).expect("acquire");
    clock.advance(10).expect("clock");
    let leases = [
        ("held", 1),
        ("expired", 1),
        ("theirs", 1),
        ("held", 0),
        ("", 1),
        ("never", 1),
    ];
    let answers = store.renew_batch("me", 2_000, &leases).expect("batch");
    assert_eq!(answers.len(), leases.len());
    let grant = answers[0].as_ref().expect("held is renewed");
    assert_eq!(
        (grant.ttl_ms, grant.record.epoch, grant.record.lease_until_ms),
        (2_000, 1, 12_110)
    );
    // Each refusal is the batch's answer for that lease alone, in the leases' order.
    let refusals = ["lost", "lost", "invalid", "invalid", "lost"];
    for (answer, expected) in answers[1..].iter().zip(refusals) {
        let refusal = match answer {
            Err(Error::LeaseLost { .. }) => "lost",
            Err(Error::InvalidArgument { .. }) => "invalid",
            _ => "neither",
        };
        assert_eq!(refusal, expected, "{answer:?}");
    }
    let renews: Vec<_> = store
        .history(None)
        .expect("history")
        .into_iter()
        .filter(|e| e.op == LeaseOp::Renew)
        .collect();
    assert_eq!(renews.len(), 1, "{renews:?}");
    assert_eq!(
        store.read("theirs").expect("read").expect("row").lease_until_ms,
        11_100
    );
    assert!(matches!(
        store.renew_batch("me", 99, &leases),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        store.renew_batch("", 1_000, &leases),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(store
        .renew_batch("me", 1_000, &[])
        .expect("empty batch")
        .is_empty());
    store.close().expect("close");
}
