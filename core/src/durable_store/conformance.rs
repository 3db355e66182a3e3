//! The DurableStore contract as one test suite that every backend runs against itself.

use std::sync::{Arc, Barrier};

use super::{DurableStore, PutOutcome};
use crate::errors::Error;

/// Builds a fresh, empty store on every call.
pub(crate) type MakeStore<'a> = &'a dyn Fn() -> Arc<dyn DurableStore>;

pub(crate) fn run_all(make: MakeStore<'_>) {
    create_only_never_replaces(&*make());
    get_and_delete(&*make());
    list_is_by_prefix_and_ordered(&*make());
    list_after_skips_what_sorts_before(&*make());
    racing_creates_have_one_winner(make());
    keys_are_checked(&*make());
    large_objects_round_trip(&*make());
    parts_arrive_in_order_until_taken_enough(&*make());
}

fn create_only_never_replaces(store: &dyn DurableStore) {
    assert_eq!(store.put_new("k/one", b"first").unwrap(), PutOutcome::Created);
    assert_eq!(
        store.put_new("k/one", b"second").unwrap(),
        PutOutcome::AlreadyExists
    );
    assert_eq!(store.get("k/one").unwrap().as_deref(), Some(&b"first"[..]));
    assert_eq!(store.put_new("k/empty", b"").unwrap(), PutOutcome::Created);
    assert_eq!(store.get("k/empty").unwrap().as_deref(), Some(&b""[..]));
}

fn get_and_delete(store: &dyn DurableStore) {
    assert_eq!(store.get("missing").unwrap(), None);
    store.put_new("d/x", b"1").unwrap();
    store.delete("d/x").unwrap();
    assert_eq!(store.get("d/x").unwrap(), None);
    store.delete("d/x").unwrap();
    // A deleted name can be created again.
    assert_eq!(store.put_new("d/x", b"2").unwrap(), PutOutcome::Created);
    assert_eq!(store.get("d/x").unwrap().as_deref(), Some(&b"2"[..]));
    // Many at once, across folders, one of them missing; what is not named stays.
    for key in ["m/a/1", "m/a/2", "m/b/c/1", "m/b/kept"] {
        store.put_new(key, b"x").unwrap();
    }
    let gone = ["m/a/1", "m/a/2", "m/b/c/1", "m/none"].map(str::to_owned);
    store.delete_all(&gone).unwrap();
    let left: Vec<String> = store.list("m/").unwrap().into_iter().map(|o| o.key).collect();
    assert_eq!(left, ["m/b/kept"]);
    store.delete_all(&gone).unwrap();
    assert_eq!(store.put_new("m/a/1", b"y").unwrap(), PutOutcome::Created);
}

fn list_is_by_prefix_and_ordered(store: &dyn DurableStore) {
    for key in ["p/b/2", "p/a", "p/b/1", "pq", "q/a"] {
        store.put_new(key, key.as_bytes()).unwrap();
    }
    let keys = |prefix: &str| -> Vec<(String, u64)> {
        store
            .list(prefix)
            .unwrap()
            .into_iter()
            .map(|o| (o.key, o.size))
            .collect()
    };
    assert_eq!(
        keys("p/"),
        [("p/a".into(), 3), ("p/b/1".into(), 5), ("p/b/2".into(), 5)]
    );
    assert_eq!(keys("p/b"), [("p/b/1".into(), 5), ("p/b/2".into(), 5)]);
    assert_eq!(keys("p").len(), 4);
    assert_eq!(keys("").len(), 5);
    assert!(keys("nothing/").is_empty());
}

/// The tenure's view: copies numbered in padded folders, the marker after them.
fn list_after_skips_what_sorts_before(store: &dyn DurableStore) {
    for key in [
        "e/01/files/a",
        "e/01/m.json",
        "e/02/files/a",
        "e/02/m.json",
        "e/03/files/a",
        "e/tenure.json",
        "f/01",
    ] {
        store.put_new(key, b"x").unwrap();
    }
    let keys = |prefix: &str, after: &str| -> Vec<String> {
        store
            .list_after(prefix, after)
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect()
    };
    // "e/020" sorts after every key of folder 02 and before those of 03.
    assert_eq!(keys("e/", "e/020"), ["e/03/files/a", "e/tenure.json"]);
    assert_eq!(
        keys("e/", "e/02/files/a"),
        ["e/02/m.json", "e/03/files/a", "e/tenure.json"]
    );
    assert_eq!(keys("e/", "e/tenure.json"), Vec::<String>::new());
    assert_eq!(keys("e/", "").len(), 6);
    assert_eq!(
        keys("e/", ""),
        store
            .list("e/")
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect::<Vec<_>>()
    );
}

fn racing_creates_have_one_winner(store: Arc<dyn DurableStore>) {
    let racers = 8;
    let barrier = Arc::new(Barrier::new(racers));
    let outcomes: Vec<(usize, PutOutcome)> = (0..racers)
        .map(|i| {
            let (store, barrier) = (store.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                (
                    i,
                    store
                        .put_new("race/one", format!("racer {i}").as_bytes())
                        .unwrap(),
                )
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let winners: Vec<usize> = outcomes
        .iter()
        .filter(|(_, o)| *o == PutOutcome::Created)
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let stored = store.get("race/one").unwrap().unwrap();
    assert_eq!(stored, format!("racer {}", winners[0]).into_bytes());
}

fn keys_are_checked(store: &dyn DurableStore) {
    for bad in ["../escape", "/abs", "a//b", ".hidden"] {
        assert!(
            matches!(store.put_new(bad, b"x"), Err(Error::InvalidArgument { .. })),
            "{bad}"
        );
        assert!(
            matches!(store.get(bad), Err(Error::InvalidArgument { .. })),
            "{bad}"
        );
        assert!(
            matches!(store.delete(bad), Err(Error::InvalidArgument { .. })),
            "{bad}"
        );
    }
    assert!(matches!(store.list("../"), Err(Error::InvalidArgument { .. })));
}

fn large_objects_round_trip(store: &dyn DurableStore) {
    let bytes: Vec<u8> = (0..(9 << 20))
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    assert_eq!(store.put_new("big", &bytes).unwrap(), PutOutcome::Created);
    assert_eq!(store.get("big").unwrap().unwrap(), bytes);
    assert_eq!(store.list("big").unwrap()[0].size, bytes.len() as u64);
}

/// An object read in parts is the object, in order, however the backend cuts it; a reader
/// that has had enough stops the read; a missing object is told apart; errors of the reader
/// come back as they are.
fn parts_arrive_in_order_until_taken_enough(store: &dyn DurableStore) {
    let bytes: Vec<u8> = (0..(5 << 20) + 77)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    store.put_new("parts/big", &bytes).unwrap();
    store.put_new("parts/empty", b"").unwrap();
    // Every part taken: whether the object was found, and its parts one after the other.
    let gathered = |key: &str| {
        let mut got = Vec::new();
        let found = store
            .get_parts(key, &mut |part| {
                got.extend_from_slice(part);
                Ok(true)
            })
            .unwrap();
        (found, got)
    };
    assert!(
        gathered("parts/big") == (true, bytes),
        "the parts are not the object"
    );
    let mut calls = 0;
    assert!(store
        .get_parts("parts/big", &mut |_| {
            calls += 1;
            Ok(false)
        })
        .unwrap());
    assert_eq!(calls, 1, "the read went on after the reader stopped");
    assert_eq!(gathered("parts/empty"), (true, Vec::new()));
    assert!(!store.get_parts("parts/missing", &mut |_| Ok(true)).unwrap());
    let refused = store.get_parts("parts/big", &mut |_| {
        Err(Error::invalid_argument("the reader's own"))
    });
    assert!(
        matches!(&refused, Err(Error::InvalidArgument { message }) if message == "the reader's own"),
        "{refused:?}"
    );
    assert!(matches!(
        store.get_parts("../escape", &mut |_| Ok(true)),
        Err(Error::InvalidArgument { .. })
    ));
}
