//! The shared router scenarios of `tests/vectors/router-scenarios.json`, replayed on the core
//! as every door replays them: one SQLite lease store and one directory durable store shared
//! by the replicas, one manual clock for the store and every router.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use gotry_tenant_state::durable_store::dir::DirectoryDurableStore;
use gotry_tenant_state::router::{CopyPolicy, Durability, RouterEvent, RouterOptions};
use gotry_tenant_state::{
    lease_key_for, CloseReport, Error, LeaseStore, ManualClock, RouterCall, SqliteLeaseStore, TenantHandle,
    TenantRouter,
};
use gotry_test_support::lines;
use serde_json::{json, Value};

fn scenarios() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/vectors/router-scenarios.json"
    );
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

/// What a step answered, in the vectors' spelling.
fn outcome<T>(answer: Result<T, Error>, ok: impl FnOnce(T) -> Value) -> Value {
    match answer {
        Ok(value) => ok(value),
        Err(error) => json!({ "error": error.code_str() }),
    }
}

fn append_line(handle: &TenantHandle, line: &str) -> Result<(), Error> {
    lines::append(&handle.root, line);
    Ok(())
}

struct Site {
    doc: Value,
    dir: PathBuf,
    clock: Arc<ManualClock>,
    leases: Arc<dyn LeaseStore>,
    durable: Arc<DirectoryDurableStore>,
    routers: HashMap<String, Arc<TenantRouter>>,
    drains: HashMap<String, Arc<Drains>>,
    calls: HashMap<String, RouterCall>,
    handoffs: HashMap<String, JoinHandle<Result<(), Error>>>,
    closes: HashMap<String, JoinHandle<CloseReport>>,
}

/// The `draining` events one router told, by key: a step that begins a drain in the
/// background returns once its drain was told, so the next step may assume it has begun.
#[derive(Default)]
struct Drains {
    told: Mutex<HashMap<String, usize>>,
    changed: Condvar,
}

impl Drains {
    fn told(&self, key: &str) -> usize {
        self.told.lock().unwrap().get(key).copied().unwrap_or(0)
    }

    fn tell(&self, key: String) {
        *self.told.lock().unwrap().entry(key).or_default() += 1;
        self.changed.notify_all();
    }

    /// Waits until a drain of `key` is told beyond the `before` told already.
    fn until_told(&self, key: &str, before: usize) {
        // Not a time limit on the router: a bound on a replay that would otherwise hang.
        let (told, _) = self
            .changed
            .wait_timeout_while(self.told.lock().unwrap(), Duration::from_secs(30), |told| {
                told.get(key).copied().unwrap_or(0) <= before
            })
            .unwrap();
        let now = told.get(key).copied().unwrap_or(0);
        assert!(now > before, "no draining event told for {key} within 30 s");
    }
}

/// A close report in the vectors' spelling; no tenant may fail in these scenarios.
fn close_report(report: CloseReport) -> Value {
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    json!({ "handed_off": report.handed_off, "timed_out": report.timed_out })
}

impl Site {
    fn new(doc: &Value, dir: &Path) -> Site {
        let clock = Arc::new(ManualClock::new(doc["start_ms"].as_i64().unwrap()));
        let leases = SqliteLeaseStore::open(dir.join("leases.db"))
            .unwrap()
            .with_clock(clock.clone());
        Site {
            doc: doc.clone(),
            dir: dir.to_path_buf(),
            clock,
            leases: Arc::new(leases),
            durable: Arc::new(DirectoryDurableStore::open(dir.join("durable")).unwrap()),
            routers: HashMap::new(),
            drains: HashMap::new(),
            calls: HashMap::new(),
            handoffs: HashMap::new(),
            closes: HashMap::new(),
        }
    }

    fn key(&self, step: &Value) -> String {
        lease_key_for(
            self.doc["organization"].as_str().unwrap(),
            step["tenant"].as_str().unwrap(),
        )
        .unwrap()
    }

    fn router(&self, step: &Value) -> Arc<TenantRouter> {
        self.routers[step["replica"].as_str().unwrap()].clone()
    }

    fn drains(&self, step: &Value) -> Arc<Drains> {
        self.drains[step["replica"].as_str().unwrap()].clone()
    }

    /// Runs one step and returns what it answered, or `None` for a step that expects nothing.
    fn step(&mut self, step: &Value) -> Option<Value> {
        let doc = &self.doc;
        let answer = match step["do"].as_str().unwrap() {
            "start" => {
                let replica = step["replica"].as_str().unwrap();
                let mut options = RouterOptions::new(
                    self.leases.clone(),
                    self.durable.clone(),
                    self.dir.join(replica),
                    replica.to_owned(),
                    doc["ttl_ms"].as_i64().unwrap(),
                    doc["margin_ms"].as_i64().unwrap(),
                );
                options.capacity = Some(step["capacity"].as_u64().unwrap() as usize);
                options.copy_policy = CopyPolicy {
                    interval: Duration::from_millis(doc["copy_interval_ms"].as_u64().unwrap()),
                    durability: Durability::parse(step["durability"].as_str().unwrap()).unwrap(),
                };
                options.clock = self.clock.clone();
                let drains = Arc::new(Drains::default());
                let told = drains.clone();
                options.on_event = Some(Arc::new(move |event| {
                    if let RouterEvent::Draining { key, .. } = event {
                        told.tell(key);
                    }
                }));
                let router = TenantRouter::start(options).unwrap();
                self.routers.insert(replica.to_owned(), Arc::new(router));
                self.drains.insert(replica.to_owned(), drains);
                return None;
            }
            "open" => {
                let org = doc["organization"].as_str().unwrap();
                let answer = self.router(step).open(org, step["tenant"].as_str().unwrap());
                outcome(answer, |handle| json!({ "epoch": handle.epoch() }))
            }
            "run" => {
                let line = step["line"].as_str().unwrap();
                let answer = self.router(step).run(&self.key(step), |h| append_line(h, line));
                outcome(answer, |()| json!({ "ok": true }))
            }
            "begin" => {
                let name = step["call"].as_str().unwrap();
                let answer = self.router(step).begin(&self.key(step)).and_then(|call| {
                    append_line(call.handle(), name)?;
                    Ok(call)
                });
                outcome(answer, |call| {
                    self.calls.insert(name.to_owned(), call);
                    json!({ "ok": true })
                })
            }
            "end" => {
                let call = self.calls.remove(step["call"].as_str().unwrap()).unwrap();
                outcome(call.finish(), |()| json!({ "ok": true }))
            }
            "handoff" => {
                let timeout = Duration::from_millis(step["timeout_ms"].as_u64().unwrap());
                let answer = self.router(step).handoff(&self.key(step), timeout);
                outcome(answer, |()| json!({ "ok": true }))
            }
            "handoff_start" => {
                let (router, key, drains) = (self.router(step), self.key(step), self.drains(step));
                let timeout = Duration::from_millis(step["timeout_ms"].as_u64().unwrap());
                let before = drains.told(&key);
                let thread = {
                    let key = key.clone();
                    std::thread::spawn(move || router.handoff(&key, timeout))
                };
                drains.until_told(&key, before);
                self.handoffs
                    .insert(step["handoff"].as_str().unwrap().to_owned(), thread);
                return None;
            }
            "handoff_wait" => {
                let thread = self.handoffs.remove(step["handoff"].as_str().unwrap()).unwrap();
                outcome(thread.join().unwrap(), |()| json!({ "ok": true }))
            }
            "close" => {
                let timeout = Duration::from_millis(step["timeout_ms"].as_u64().unwrap());
                close_report(self.router(step).close(timeout))
            }
            "close_start" => {
                let (router, key, drains) = (self.router(step), self.key(step), self.drains(step));
                let timeout = Duration::from_millis(step["timeout_ms"].as_u64().unwrap());
                let before = drains.told(&key);
                let thread = std::thread::spawn(move || router.close(timeout));
                drains.until_told(&key, before);
                self.closes
                    .insert(step["close"].as_str().unwrap().to_owned(), thread);
                return None;
            }
            "close_wait" => {
                let thread = self.closes.remove(step["close"].as_str().unwrap()).unwrap();
                close_report(thread.join().unwrap())
            }
            "status" => {
                let rows: Vec<Value> = self
                    .router(step)
                    .status()
                    .unwrap()
                    .into_iter()
                    .map(|t| {
                        json!({
                            "tenant": t.key.rsplit('/').next().unwrap(),
                            "state": t.state.as_str(),
                            "epoch": t.epoch,
                            "in_flight": t.in_flight,
                            "writes_since_copy": t.writes_since_copy,
                        })
                    })
                    .collect();
                Value::Array(rows)
            }
            "lines" => {
                let org = doc["organization"].as_str().unwrap();
                let root = gotry_tenant_state::tenant_root_for(
                    &self.dir.join(step["replica"].as_str().unwrap()),
                    org,
                    step["tenant"].as_str().unwrap(),
                )
                .unwrap();
                Value::Array(lines::read(&root).into_iter().map(Value::String).collect())
            }
            "advance" => {
                self.clock.advance(step["ms"].as_i64().unwrap()).unwrap();
                return None;
            }
            other => panic!("a step this replayer does not know: {other}"),
        };
        Some(answer)
    }
}

#[test]
fn every_router_scenario_replays_on_the_core() {
    let doc = scenarios();
    let all = doc["scenarios"].as_array().unwrap();
    let mut replayed = 0;
    for scenario in all {
        let name = scenario["name"].as_str().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut site = Site::new(&doc, dir.path());
        for (n, step) in scenario["steps"].as_array().unwrap().iter().enumerate() {
            let answer = site.step(step);
            if let Some(answer) = answer {
                assert_eq!(answer, step["expect"], "{name}, step {n}: {step}");
            }
        }
        for (_, router) in site.routers.drain() {
            router.close(Duration::from_secs(10));
        }
        replayed += 1;
    }
    assert_eq!(replayed, all.len());
    assert!(replayed >= 10, "the scenarios file lost scenarios: {replayed}");
}
