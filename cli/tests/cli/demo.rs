//! `demo`: each step of the handoff, checked for what the lease and copy rules say it must show.

use serde_json::Value;

use crate::{numbers, Sandbox};

/// `(actor, step, outcome)` of each event, in order: the story the demo must tell.
const STORY: [(&str, &str, &str); 17] = [
    ("replica-a", "acquire", "granted"),
    ("replica-a", "renew", "granted"),
    ("replica-b", "acquire", "refused"),
    ("replica-a", "write", "open"),
    ("replica-a", "copy", "written"),
    ("replica-a", "write", "fenced"),
    ("replica-b", "acquire", "refused"),
    ("store", "expiry", "expired"),
    ("replica-b", "acquire", "granted"),
    ("replica-b", "restore", "restored"),
    ("replica-a", "renew", "refused"),
    ("replica-a", "write", "fenced"),
    ("replica-a", "copy", "fenced"),
    ("replica-b", "write", "open"),
    ("replica-b", "release", "released"),
    ("replica-b", "write", "fenced"),
    ("operator", "restore", "restored"),
];

const LEDGER: [&str; 2] = ["credit 100", "debit 30"];

fn str_of<'a>(event: &'a Value, field: &str) -> &'a str {
    event[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field} in {event}"))
}

/// What every play of the demo must show, on either pace.
fn check_story(demo: &Value) {
    let events = demo["events"].as_array().unwrap();
    let shape: Vec<(&str, &str, &str)> = events
        .iter()
        .map(|e| (str_of(e, "actor"), str_of(e, "step"), str_of(e, "outcome")))
        .collect();
    assert_eq!(shape, STORY, "{demo:#}");
    let epoch = |i: usize| events[i]["epoch"].as_i64().unwrap();
    // A acquires epoch 1 and keeps it through its renewal.
    assert_eq!((epoch(0), epoch(1)), (1, 1));
    // B is refused and told who holds the tenant, at which epoch, until when.
    for i in [2, 6] {
        assert_eq!(events[i]["code"], "GOTRY_TENANT_LEASE_HELD");
        assert_eq!(events[i]["holder"]["owner"], "replica-a");
        assert_eq!(events[i]["holder"]["epoch"], 1);
        assert_eq!(events[i]["holder"]["leaseUntilMs"], events[1]["leaseUntilMs"]);
    }
    // A's gate closes on its own deadline, before the store's lease ends.
    assert_eq!(events[5]["code"], "GOTRY_TENANT_FENCED");
    assert_eq!(events[5]["reason"], "lease_expired_locally");
    let at = |i: usize| events[i]["atMs"].as_i64().unwrap();
    assert!(at(5) >= events[1]["fenceAtMs"].as_i64().unwrap());
    assert!(
        at(6) < events[1]["leaseUntilMs"].as_i64().unwrap(),
        "B was refused inside the margin"
    );
    // The lease expires on the store's clock, then B gets the next epoch.
    assert!(at(7) >= events[1]["leaseUntilMs"].as_i64().unwrap());
    assert_eq!(epoch(7), 1);
    assert_eq!(epoch(8), 2);
    // A's renewal is refused for good and its gate says why.
    assert_eq!(events[10]["code"], "GOTRY_TENANT_LEASE_LOST");
    assert_eq!(
        (events[11]["reason"].as_str(), epoch(11)),
        (Some("lease_lost"), 1)
    );
    assert_eq!(epoch(13), 2);
    assert_eq!(events[15]["reason"], "lease_released");

    // The data: A's copy in epoch 1 is what B starts from, ledger and all.
    let copy = |i: usize| (epoch(i), events[i]["seq"].as_u64().unwrap());
    assert_eq!(copy(4), (1, 1));
    assert!(events[4]["bytes"].as_u64().unwrap() > 0);
    let restored = &events[9];
    assert_eq!(epoch(9), 2);
    assert_eq!(restored["restored"], serde_json::json!({ "epoch": 1, "seq": 1 }));
    assert_eq!(restored["skipped"], serde_json::json!([]));
    assert_eq!(restored["ledger"], serde_json::json!(LEDGER));
    // A's frozen copy lands in epoch 1 after B began, and is not taken as written ...
    assert_eq!(copy(12), (1, 2));
    assert_eq!(events[12]["code"], "GOTRY_TENANT_FENCED");
    assert_eq!(events[12]["reason"], "lease_lost");
    assert!(at(12) > at(9), "the late copy landed after B's restore");
    // ... and the next restore passes over it for the copy epoch 2 began from.
    let operator = &events[16];
    assert_eq!(operator["restored"], serde_json::json!({ "epoch": 1, "seq": 1 }));
    assert_eq!(
        operator["skipped"],
        serde_json::json!([{ "epoch": 1, "seq": 2, "reason": "superseded" }])
    );
    assert_eq!(operator["ledger"], serde_json::json!(LEDGER));
    // Time only moves forward through the story.
    assert!((1..events.len()).all(|i| at(i - 1) <= at(i)), "{demo:#}");

    let history: Vec<(&str, &str, i64)> = demo["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (str_of(e, "op"), str_of(e, "owner"), e["epoch"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        history,
        [
            ("acquire", "replica-a", 1),
            ("renew", "replica-a", 1),
            ("acquire", "replica-b", 2),
            ("release", "replica-b", 2),
        ]
    );
    let tenant = str_of(demo, "tenant");
    assert!(
        tenant.starts_with("gotry-demo/t-") && tenant.len() == "gotry-demo/".len() + 34,
        "{tenant}"
    );
}

#[test]
fn the_simulated_demo_tells_the_handoff_with_exact_times() {
    let sandbox = Sandbox::new();
    let demo = sandbox.run(["demo", "--json"]).json();
    check_story(&demo);
    assert_eq!(demo["clock"], "simulated");
    assert_eq!(
        (demo["ttlMs"].as_i64(), demo["marginMs"].as_i64()),
        (Some(10_000), Some(1_000))
    );
    let times = numbers(&demo["events"], "atMs");
    assert_eq!(
        times,
        [
            0, 4_000, 5_000, 5_000, 5_000, 13_500, 13_500, 14_000, 14_000, 14_000, 14_500, 14_500, 14_500,
            14_500, 14_500, 14_500, 14_500
        ]
    );
    for (n, lease_until, fence_at) in [(0, 10_000, 9_000), (1, 14_000, 13_000)] {
        let event = &demo["events"][n];
        assert_eq!(
            (event["leaseUntilMs"].as_i64(), event["fenceAtMs"].as_i64()),
            (Some(lease_until), Some(fence_at)),
            "event {n}"
        );
    }
    let log_times = numbers(&demo["history"], "atMs");
    assert_eq!(log_times, [0, 4_000, 14_000, 14_500]);
    // The same tenant every time: the throwaway store starts empty on every run.
    let again = sandbox.run(["demo", "--json"]).json();
    assert_eq!(again["tenant"], demo["tenant"]);
    assert_eq!(again["events"], demo["events"]);
}

#[test]
fn the_demo_text_shows_each_step() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(["demo"]);
    let text = run.ok();
    let step = |needle: &str| {
        text.lines()
            .position(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{text}"))
    };
    let order = [
        step("t+0.000 s   replica-a  acquire  granted   epoch 1, lease until t+10.000 s, write fence at t+9.000 s"),
        step("t+4.000 s   replica-a  renew    granted   epoch 1 kept, lease until t+14.000 s"),
        step("t+5.000 s   replica-b  acquire  refused   GOTRY_TENANT_LEASE_HELD: replica-a holds epoch 1 until t+14.000 s"),
        step("t+5.000 s   replica-a  copy     written   epoch 1 seq 1: the ledger"),
        step("replica-a starts its next copy: its gate says yes"),
        step("replica-a stalls for 8.500 s"),
        step("t+13.500 s  replica-a  write    fenced    GOTRY_TENANT_FENCED: lease_expired_locally"),
        step("t+13.500 s  replica-b  acquire  refused   GOTRY_TENANT_LEASE_HELD"),
        step("t+14.000 s  store      expiry   expired   epoch 1 of replica-a"),
        step("t+14.000 s  replica-b  acquire  granted   epoch 2,"),
        step("t+14.000 s  replica-b  restore  restored  epoch 1 seq 1: the ledger holds credit 100, debit 30"),
        step("t+14.500 s  replica-a  renew    refused   GOTRY_TENANT_LEASE_LOST"),
        step("replica-a  write    fenced    GOTRY_TENANT_FENCED: lease_lost"),
        step("replica-a  copy     fenced    GOTRY_TENANT_FENCED: lease_lost after its manifest; epoch 1 seq 2 is in the store"),
        step("replica-b  release  released  epoch 2 ends now"),
        step("replica-b  write    fenced    GOTRY_TENANT_FENCED: lease_released"),
        step("operator   restore  restored  epoch 1 seq 1 (credit 100, debit 30); epoch 1 seq 2 passed over: superseded"),
        step("what the store logged for gotry-demo/t-"),
        step("t+14.000 s  acquire  replica-b  2"),
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "steps out of order: {order:?}\n{text}"
    );
    assert!(text.starts_with("gotry-tenant demo: "), "{text}");
    assert!(
        text.contains("a throwaway SQLite file, on a simulated clock"),
        "{text}"
    );
}

/// On a store named by URL the story runs in real time on the store's clock. A pause of
/// this machine longer than the demo's margins changes the story, which the demo reports
/// as such; that alone is retried, a few times.
#[test]
fn the_demo_runs_in_real_time_on_a_named_store() {
    let sandbox = Sandbox::new();
    let url = format!("sqlite://{}", sandbox.path("named.db").display());
    let mut attempts = 0;
    let demo = loop {
        attempts += 1;
        let run = sandbox.run(["demo", "--store", &url, "--json"]);
        if run.status == 0 || attempts == 3 {
            break run.json();
        }
        run.failed_json(1, "DEMO_DIVERGED");
    };
    check_story(&demo);
    assert_eq!(demo["clock"], "store");
    assert_eq!(demo["ttlMs"], 1_000);
    // A URL without credentials is shown as it is.
    assert_eq!(demo["store"], url.as_str());
    // The run's tenant is its own: the store keeps it, and the next run picks another.
    let tenant = str_of(&demo, "tenant");
    let kept = sandbox
        .run(["lease", "history", tenant, "--store", &url, "--json"])
        .json();
    assert_eq!(kept["entries"].as_array().unwrap().len(), 4);
    let second = sandbox.run(["demo", "--store", "named.db", "--json"]);
    if second.status == 0 {
        assert_ne!(second.json()["tenant"], demo["tenant"]);
    } else {
        second.failed_json(1, "DEMO_DIVERGED");
    }
}
