//! `gotry-tenant demo`: one tenant handed over from replica-a to replica-b, played by two
//! real `TenantLease` holders on a real store and told as a timeline.
//!
//! The story shows each safety rule once: the store refuses a second holder and names the
//! first; a stalled holder closes its own write gate before the store would let anyone in
//! (the margin); the next holder gets the next epoch; the stale holder's renewal is refused
//! for good. The tenant's data goes along: replica-a's ledger reaches replica-b through an
//! epoch-scoped durable copy, and a copy that the stalled replica-a finishes late, into its
//! old epoch, is passed over by the next restore. Each step checks that the outcome is the
//! one the rules promise, so the demo doubles as a smoke test of a store: it exits non-zero
//! when the story went differently.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use gotry_tenant_state::lease_store::sqlite::sqlite_code_name;
use gotry_tenant_state::{
    lease_key_for, tenant_root_for, CopyId, DirectoryDurableStore, DurableStore, EpochCopies, Error,
    FenceReason, LeaseOptions, LeaseRecord, LeaseStore, ManualClock, MonotonicClock, ObjectInfo,
    OrganizationKey, PutOutcome, SkipReason, SkippedCopy, SqliteLeaseStore, SqliteOptions,
    SystemMonotonicClock, SystemWallClock, TenantLease, WallClock, WrittenCopy,
};
use serde_json::{json, Value};

use crate::cli::DemoArgs;
use crate::failure::{Exit, Failure};
use crate::render;
use crate::store::StoreTarget;
use crate::Report;

const ORGANIZATION: &str = "gotry-demo";
const ISSUER: &str = "https://idp.example";
/// Names the demo's tenant and nothing else: not a secret, never a production key.
const DEMO_KEY: &[u8; 32] = b"gotry-tenant-demo-key-not-secret";
const REPLICA_A: &str = "replica-a";
const REPLICA_B: &str = "replica-b";
/// What replica-a writes into the tenant's ledger while it holds the tenant.
const LEDGER: [&str; 2] = ["credit 100", "debit 30"];

/// The story's timing. The same steps run on both paces; only the lengths differ.
struct Plan {
    ttl_ms: i64,
    margin_ms: i64,
    /// From A's acquire to its renewal.
    renew_after_ms: i64,
    /// From A's renewal to B's first attempt.
    b_tries_after_ms: i64,
    /// How far past a deadline the story looks: A's fence, then B's acquire.
    overshoot_ms: i64,
}

/// On a simulated clock lengths cost nothing, so they are chosen to read well.
const SIMULATED: Plan = Plan {
    ttl_ms: 10_000,
    margin_ms: 1_000,
    renew_after_ms: 4_000,
    b_tries_after_ms: 1_000,
    overshoot_ms: 500,
};

/// In real time the run stays short, and the margin leaves 350 ms between A's fence check
/// and the store's expiry, so that a busy machine's ordinary pauses do not change the story.
const REAL_TIME: Plan = Plan {
    ttl_ms: 1_000,
    margin_ms: 400,
    renew_after_ms: 200,
    b_tries_after_ms: 50,
    overshoot_ms: 50,
};

/// How time passes in the story.
enum Pace {
    /// One manual clock is the store's wall clock and both holders' monotonic clock, so
    /// the run is instant and its times are exact.
    Simulated(Arc<ManualClock>),
    /// The store decides on its own clock (a database server's, say); the holders use the
    /// system's monotonic clock, and waits are real.
    RealTime,
}

impl Pace {
    fn plan(&self) -> &'static Plan {
        match self {
            Pace::Simulated(_) => &SIMULATED,
            Pace::RealTime => &REAL_TIME,
        }
    }

    fn holder_clock(&self) -> Arc<dyn MonotonicClock> {
        match self {
            Pace::Simulated(clock) => clock.clone(),
            Pace::RealTime => Arc::new(SystemMonotonicClock),
        }
    }

    fn wait(&self, ms: i64) -> Result<(), Failure> {
        if ms > 0 {
            match self {
                Pace::Simulated(clock) => {
                    clock.advance(ms)?;
                }
                Pace::RealTime => std::thread::sleep(Duration::from_millis(ms.unsigned_abs())),
            }
        }
        Ok(())
    }
}

pub fn run(args: &DemoArgs) -> Result<Report, Failure> {
    // The replicas' state and the durable copies are thrown away on every pace; so is the
    // lease store unless one is named. The folder outlives everything `tell` drops on return.
    let folder = tempfile::Builder::new()
        .prefix("gotry-tenant-demo-")
        .tempdir()
        .map_err(|error| {
            Failure::io(
                Exit::Storage,
                &error,
                "cannot create a temporary folder for the demo's replicas and copies".to_owned(),
                "set TMPDIR to a writable folder",
            )
        })?;
    match args.store.as_deref().map(StoreTarget::parse) {
        None => {
            let clock = Arc::new(ManualClock::new(SystemWallClock.now_ms()?));
            let options = SqliteOptions {
                clock: clock.clone(),
                ..SqliteOptions::default()
            };
            let store = SqliteLeaseStore::open_with(folder.path().join("leases.db"), options)?;
            let pace = Pace::Simulated(clock);
            tell(
                Arc::new(store),
                pace,
                "a throwaway SQLite file",
                "alice",
                folder.path(),
            )
        }
        Some(target) => {
            // A store that is kept is shared with processes that decide on its real clock,
            // so the story runs in real time there, on a tenant of its own for each run.
            let subject = format!("demo-{}-{}", SystemWallClock.now_ms()?, std::process::id());
            tell(
                target.open()?,
                Pace::RealTime,
                &target.describe(),
                &subject,
                folder.path(),
            )
        }
    }
}

/// Plays the story on `store`, with the replicas' state and the durable copies in `folder`.
fn tell(
    store: Arc<dyn LeaseStore>,
    pace: Pace,
    store_name: &str,
    subject: &str,
    folder: &Path,
) -> Result<Report, Failure> {
    let tenant = OrganizationKey::new(DEMO_KEY)?.derive_ledger_tenant_id(ISSUER, subject)?;
    let key = lease_key_for(ORGANIZATION, &tenant)?;
    let mut story = Story {
        start_ms: store.now_ms()?,
        store,
        durable: Arc::new(DirectoryDurableStore::open(folder.join("copies"))?),
        folder: folder.to_owned(),
        pace,
        tenant,
        key,
        events: Vec::new(),
        lines: String::new(),
    };
    story.play()?;
    story.report(store_name, subject)
}

/// Milliseconds as seconds with three decimals: "8.500 s".
fn seconds(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    format!("{sign}{}.{:03} s", ms / 1_000, ms % 1_000)
}

/// A moment of the story, relative to its start: "t+14.000 s".
fn stamp(ms: i64) -> String {
    if ms < 0 {
        format!("t{}", seconds(ms))
    } else {
        format!("t+{}", seconds(ms))
    }
}

/// Who did what, and how it went: `(actor, step, outcome)`.
struct Step<'a>(&'a str, &'a str, &'a str);

/// Width of the time column; the outcome's detail starts after the four columns.
const TIME_WIDTH: usize = 10;
const DETAIL_INDENT: usize = TIME_WIDTH + 2 + 9 + 2 + 7 + 2 + 8 + 2;

struct Story {
    store: Arc<dyn LeaseStore>,
    /// Where the replicas keep the tenant's copies.
    durable: Arc<dyn DurableStore>,
    /// Holds each replica's state root, and the folder an operator restores into.
    folder: PathBuf,
    pace: Pace,
    tenant: String,
    key: String,
    /// The store's clock when the story began; every time shown is relative to it.
    start_ms: i64,
    events: Vec<Value>,
    lines: String,
}

impl Story {
    fn plan(&self) -> &'static Plan {
        self.pace.plan()
    }

    fn now(&self) -> Result<i64, Failure> {
        Ok(self.store.now_ms()?.saturating_sub(self.start_ms))
    }

    fn relative(&self, store_ms: i64) -> i64 {
        store_ms.saturating_sub(self.start_ms)
    }

    fn options(&self, replica: &str) -> LeaseOptions {
        LeaseOptions {
            key: self.key.clone(),
            replica_id: replica.to_owned(),
            store: self.store.clone(),
            ttl_ms: self.plan().ttl_ms,
            margin_ms: self.plan().margin_ms,
            clock: self.pace.holder_clock(),
        }
    }

    /// One step of the timeline: a line for people (the facts, then why they matter on a line
    /// of its own when there is something to say), an event for scripts.
    fn event(&mut self, step: Step<'_>, detail: &str, why: &str, fields: Value) -> Result<(), Failure> {
        let at = self.now()?;
        let Step(actor, action, outcome) = step;
        let mut event = json!({ "atMs": at, "actor": actor, "step": action, "outcome": outcome });
        if let (Some(event), Value::Object(fields)) = (event.as_object_mut(), fields) {
            event.extend(fields);
        }
        self.events.push(event);
        let stamp = stamp(at);
        self.lines.push_str(&format!(
            "  {stamp:<TIME_WIDTH$}  {actor:<9}  {action:<7}  {outcome:<8}  {detail}\n"
        ));
        if !why.is_empty() {
            self.lines.push_str(&format!("  {:<DETAIL_INDENT$}{why}\n", ""));
        }
        Ok(())
    }

    /// A line of narration between steps.
    fn note(&mut self, text: &str) {
        self.lines.push_str(&format!("  {:<TIME_WIDTH$}  {text}\n", ""));
    }

    fn diverged(&self, what: &str) -> Failure {
        let hint = match self.pace {
            Pace::Simulated(_) => "the lease rules did not hold on this store; please report it",
            Pace::RealTime => {
                "a pause of this machine longer than the demo's margins changes the story; run it again"
            }
        };
        Failure::new(
            Exit::Failure,
            "DEMO_DIVERGED",
            format!("the handoff went differently than the lease rules say: {what}"),
            hint,
        )
    }

    /// The store's record of the tenant, which must exist once A acquired it.
    fn record(&self) -> Result<LeaseRecord, Failure> {
        self.store
            .read(&self.key)?
            .ok_or_else(|| self.diverged("the store has no record of the tenant"))
    }

    /// A granted acquire or renew, with the lease's end in the store and the holder's fence.
    fn granted(&mut self, lease: &TenantLease, action: &str, epoch_note: &str) -> Result<(), Failure> {
        let until = self.relative(self.record()?.lease_until_ms);
        let fence = self.now()? + lease.remaining_ms()?.round() as i64;
        let detail = format!(
            "epoch {}{epoch_note}, lease until {}, write fence at {}",
            lease.epoch(),
            stamp(until),
            stamp(fence)
        );
        let fields = json!({ "epoch": lease.epoch(), "leaseUntilMs": until, "fenceAtMs": fence });
        self.event(Step(lease.replica_id(), action, "granted"), &detail, "", fields)
    }

    /// B asks for the tenant while A's lease runs in the store: it must be refused and told
    /// who holds it, which is what a router needs to forward the request.
    fn b_is_refused(&mut self, why: &str) -> Result<(), Failure> {
        let record = match TenantLease::acquire(self.options(REPLICA_B)) {
            Err(Error::LeaseHeld { record }) => record,
            Ok(lease) => {
                let _ = lease.release();
                return Err(self.diverged("replica-b was granted the tenant while replica-a's lease ran"));
            }
            Err(other) => return Err(other.into()),
        };
        let now = self.store.now_ms()?;
        let until = self.relative(record.lease_until_ms);
        let detail = format!(
            "GOTRY_TENANT_LEASE_HELD: {} holds epoch {} until {}",
            render::printable(&record.owner),
            record.epoch,
            stamp(until),
        );
        let why = format!("{}; {why}", render::expiry(&record, now));
        let fields = json!({
            "code": "GOTRY_TENANT_LEASE_HELD",
            "holder": { "owner": record.owner, "epoch": record.epoch, "leaseUntilMs": until },
        });
        self.event(Step(REPLICA_B, "acquire", "refused"), &detail, &why, fields)
    }

    /// A holder's write gate, which must be open (`expect` none) or fenced for `expect`.
    fn gate(&mut self, lease: &TenantLease, expect: Option<FenceReason>, why: &str) -> Result<(), Failure> {
        let actor = lease.replica_id();
        match (lease.assert_held(), expect) {
            (Ok(()), None) => {
                let left = lease.remaining_ms()?.round() as i64;
                let detail = format!("{} left before its fence", seconds(left));
                let fields = json!({ "epoch": lease.epoch() });
                self.event(Step(actor, "write", "open"), &detail, why, fields)
            }
            (Err(Error::Fenced { reason, .. }), Some(expected)) if reason == expected => {
                let detail = format!("GOTRY_TENANT_FENCED: {reason}");
                let fields = json!({
                    "epoch": lease.epoch(),
                    "code": "GOTRY_TENANT_FENCED",
                    "reason": reason.as_str(),
                });
                self.event(Step(actor, "write", "fenced"), &detail, why, fields)
            }
            (Ok(()), Some(expected)) => Err(self.diverged(&format!(
                "{actor}'s write gate was open where it must answer fenced ({expected})"
            ))),
            (Err(Error::Fenced { reason, .. }), _) => {
                Err(self.diverged(&format!("{actor}'s write gate answered fenced ({reason})")))
            }
            (Err(other), _) => Err(other.into()),
        }
    }

    fn play(&mut self) -> Result<(), Failure> {
        let plan = self.plan();
        let root_a = self.root(REPLICA_A)?;
        // replica-a's own copier, on the store as replica-a sees it (a put there can freeze);
        // each replica has its own, as separate processes would.
        let frozen_store = Arc::new(Freezable::new(self.durable.clone()));
        let copies_a = EpochCopies::new(frozen_store.clone());

        let a = TenantLease::acquire(self.options(REPLICA_A))?;
        self.granted(&a, "acquire", "")?;

        self.pace.wait(plan.renew_after_ms)?;
        a.renew()?;
        self.granted(&a, "renew", " kept")?;

        self.pace.wait(plan.b_tries_after_ms)?;
        self.b_is_refused("a router would forward the request to replica-a")?;
        let writes = format!(
            "replica-a acknowledges writes: {} go into its ledger",
            LEDGER.join(", ")
        );
        self.gate(&a, None, &writes)?;
        write_ledger(&root_a)?;
        let written = copies_a.write_copy(&a, &root_a)?;
        let first = written.id;
        let detail = format!(
            "epoch {} seq {}: the ledger, {} bytes in {} file",
            first.epoch, first.seq, written.bytes, written.files
        );
        let why = "every object create-only under epoch 1's prefix, the manifest last";
        let fields =
            json!({ "epoch": first.epoch, "seq": first.seq, "files": written.files, "bytes": written.bytes });
        self.event(Step(REPLICA_A, "copy", "written"), &detail, why, fields)?;

        std::thread::scope(|scope| {
            let (frozen_tx, frozen_rx) = mpsc::sync_channel(0);
            // Dropped on every return from here, which wakes a frozen copier: no early return
            // can leave the scope waiting for it.
            let (wake_tx, wake_rx) = mpsc::channel();
            frozen_store.arm(frozen_tx, wake_rx);
            let late = scope.spawn(|| {
                let outcome = copies_a.write_copy(&a, &root_a);
                frozen_store.disarm();
                outcome
            });
            if frozen_rx.recv().is_err() {
                joined(late)?;
                return Err(self.diverged("replica-a's second copy ended before it reached the store"));
            }
            let stall = a.remaining_ms()?.ceil() as i64 + plan.overshoot_ms;
            self.note("replica-a starts its next copy: its gate says yes, its first object is on its way");
            self.note(&format!(
                "replica-a stalls for {} (a long GC pause, a frozen VM) mid-copy and misses its renewals",
                seconds(stall)
            ));
            self.pace.wait(stall)?;
            self.gate(
                &a,
                Some(FenceReason::LeaseExpiredLocally),
                "its local deadline passed: it stops acknowledging writes without asking the store",
            )?;
            self.b_is_refused("this gap is the margin: nobody writes in it")?;

            loop {
                let record = self.record()?;
                let now = self.store.now_ms()?;
                if record.is_expired_at(now) {
                    break;
                }
                self.pace.wait(record.lease_until_ms - now)?;
            }
            let detail = format!("epoch {} of replica-a ran out on the store's clock", a.epoch());
            let fields = json!({ "epoch": a.epoch() });
            self.event(Step("store", "expiry", "expired"), &detail, "", fields)?;

            let b = TenantLease::acquire(self.options(REPLICA_B))?;
            self.granted(&b, "acquire", "")?;
            self.b_restores(&b, first)?;

            self.pace.wait(plan.overshoot_ms)?;
            self.note("replica-a wakes up and tries to renew");
            match a.renew() {
                Err(Error::LeaseLost { message }) => {
                    let detail = format!("GOTRY_TENANT_LEASE_LOST: the store refuses epoch {}", a.epoch());
                    let why = format!(
                        "replica-b holds epoch {} now; a refused renewal is final",
                        b.epoch()
                    );
                    let fields =
                        json!({ "epoch": a.epoch(), "code": "GOTRY_TENANT_LEASE_LOST", "message": message });
                    self.event(Step(REPLICA_A, "renew", "refused"), &detail, &why, fields)?;
                }
                Ok(()) => return Err(self.diverged("replica-a renewed an epoch that replica-b had replaced")),
                Err(other) => return Err(other.into()),
            }
            self.gate(
                &a,
                Some(FenceReason::LeaseLost),
                "it stays fenced for good: epoch 1 is over",
            )?;
            // The copier was past its gate when it froze; it goes on where it stopped.
            let _ = wake_tx.send(());
            let late = self.late_copy(&a, first, joined(late))?;
            self.gate(&b, None, "replica-b serves the tenant")?;

            b.release()?;
            let released = self.record()?;
            let detail = format!(
                "epoch {} ends now; the next acquire gets epoch {}",
                released.epoch,
                released.epoch.saturating_add(1)
            );
            let fields = json!({ "epoch": released.epoch });
            self.event(Step(REPLICA_B, "release", "released"), &detail, "", fields)?;
            self.gate(
                &b,
                Some(FenceReason::LeaseReleased),
                "a graceful end: the gate closed before the store was told",
            )?;
            self.operator_restores(first, late)
        })
    }

    /// The tenant root a replica keeps under its own state root.
    fn root(&self, replica: &str) -> Result<PathBuf, Failure> {
        Ok(tenant_root_for(
            &self.folder.join(replica),
            ORGANIZATION,
            &self.tenant,
        )?)
    }

    /// replica-b starts its tenure from the newest copy that verifies, which must be
    /// replica-a's finished one: the copy frozen half-way has no manifest, so it does not exist.
    fn b_restores(&mut self, b: &TenantLease, first: CopyId) -> Result<(), Failure> {
        let root = self.root(REPLICA_B)?;
        let report = EpochCopies::new(self.durable.clone()).restore(b, &root, None)?;
        let ledger = read_ledger(&root)?;
        if report.restored != Some(first) || !report.skipped.is_empty() || ledger != LEDGER {
            return Err(self.diverged("replica-b did not restore replica-a's finished copy"));
        }
        let detail = format!(
            "epoch {} seq {}: the ledger holds {}",
            first.epoch,
            first.seq,
            ledger.join(", ")
        );
        let why = format!(
            "the newest copy below epoch {} that verifies; replica-a's half-written one has no manifest yet",
            b.epoch()
        );
        let fields = json!({
            "epoch": b.epoch(),
            "restored": { "epoch": first.epoch, "seq": first.seq },
            "skipped": [],
            "ledger": ledger,
        });
        self.event(Step(REPLICA_B, "restore", "restored"), &detail, &why, fields)
    }

    /// replica-a's frozen copier finishes: its objects and manifest land in epoch 1, and only
    /// the gate check after the manifest says the copy is not taken as written.
    fn late_copy(
        &mut self,
        a: &TenantLease,
        first: CopyId,
        outcome: gotry_tenant_state::Result<WrittenCopy>,
    ) -> Result<CopyId, Failure> {
        match outcome {
            Err(Error::Fenced {
                reason: FenceReason::LeaseLost,
                ..
            }) => {}
            Ok(_) => return Err(self.diverged("replica-a's late copy was taken as written")),
            Err(Error::Fenced { reason, .. }) => {
                return Err(self.diverged(&format!("replica-a's late copy was fenced for {reason}")))
            }
            Err(other) => return Err(other.into()),
        }
        let listing = EpochCopies::new(self.durable.clone()).list(&self.key)?;
        let late = listing
            .iter()
            .filter(|copy| copy.id.epoch == a.epoch() && copy.complete && copy.id.seq != first.seq)
            .map(|copy| copy.id)
            .next_back()
            .ok_or_else(|| self.diverged("replica-a's late copy is not in the store"))?;
        let detail = format!(
            "GOTRY_TENANT_FENCED: lease_lost after its manifest; epoch {} seq {} is in the store",
            late.epoch, late.seq
        );
        let why = "a frozen writer cannot be stopped, only kept to its own, older epoch";
        let fields = json!({
            "epoch": late.epoch,
            "seq": late.seq,
            "code": "GOTRY_TENANT_FENCED",
            "reason": FenceReason::LeaseLost.as_str(),
        });
        self.event(Step(REPLICA_A, "copy", "fenced"), &detail, why, fields)?;
        Ok(late)
    }

    /// The next restore, as `gotry-tenant copies restore` makes it: replica-a's late copy is
    /// the newest in the store, and must be passed over for the copy epoch 2 began from.
    fn operator_restores(&mut self, first: CopyId, late: CopyId) -> Result<(), Failure> {
        self.note(
            "replica-b left before its first copy: the newest copy in the store is replica-a's late one",
        );
        let root = self.folder.join("operator");
        let copies = EpochCopies::new(self.durable.clone());
        let report = copies.restore_latest(&self.key, 0, None, &root, None)?;
        let ledger = read_ledger(&root)?;
        let passed_over = [SkippedCopy {
            id: late,
            reason: SkipReason::Superseded,
        }];
        if report.restored != Some(first) || report.skipped != passed_over || ledger != LEDGER {
            return Err(self.diverged("the restore after the handoff took replica-a's late copy"));
        }
        let detail = format!(
            "epoch {} seq {} ({}); epoch {} seq {} passed over: superseded",
            first.epoch,
            first.seq,
            ledger.join(", "),
            late.epoch,
            late.seq
        );
        let why = format!(
            "epoch 2 began from epoch {} seq {}, so a later copy into epoch {} is a stale holder's \
             (as `gotry-tenant copies restore` shows)",
            first.epoch, first.seq, late.epoch
        );
        let fields = json!({
            "restored": { "epoch": first.epoch, "seq": first.seq },
            "skipped": report.skipped.iter().map(render::skipped_json).collect::<Vec<_>>(),
            "ledger": ledger,
        });
        self.event(Step("operator", "restore", "restored"), &detail, &why, fields)
    }

    fn report(&self, store_name: &str, subject: &str) -> Result<Report, Failure> {
        let plan = self.plan();
        let (clock, clock_note) = match self.pace {
            Pace::Simulated(_) => (
                "simulated",
                "on a simulated clock (the run is instant, its times exact)",
            ),
            Pace::RealTime => ("store", "on the store's own clock, in real time"),
        };
        let key = render::printable(&self.key);
        let mut text = format!(
            "gotry-tenant demo: replica-a hands one tenant over to replica-b\n\n  \
             store   {}, {clock_note}\n  \
             tenant  {key}\n          \
             the ledger tenant id of issuer {ISSUER}, subject {}, under the demo's key\n  \
             lease   ttl {}; a holder closes its write gate {} (the margin) before its lease ends\n  \
             copies  each replica keeps the ledger in SQLite; copies go to a durable store in a throwaway \
             folder\n\n  \
             {:<TIME_WIDTH$}  {:<9}  {:<7}  OUTCOME\n{}",
            render::printable(store_name),
            render::printable(subject),
            seconds(plan.ttl_ms),
            seconds(plan.margin_ms),
            "TIME",
            "ACTOR",
            "STEP",
            self.lines,
        );
        let entries = self.store.history(Some(&self.key))?;
        let rows: Vec<Vec<String>> = entries
            .iter()
            .map(|e| {
                vec![
                    stamp(self.relative(e.at_ms)),
                    e.op.as_str().to_owned(),
                    render::printable(&e.owner).into_owned(),
                    e.epoch.to_string(),
                ]
            })
            .collect();
        text.push_str(&format!("\n  what the store logged for {key}:\n"));
        for line in render::table(&["WHEN", "OP", "OWNER", "EPOCH"], &rows).lines() {
            text.push_str(&format!("    {line}\n"));
        }
        let history: Vec<Value> = entries
            .iter()
            .map(|e| {
                let mut entry = render::history_json(e);
                entry["atMs"] = self.relative(e.at_ms).into();
                entry
            })
            .collect();
        let json = json!({
            "store": store_name,
            "clock": clock,
            "tenant": self.key,
            "subject": subject,
            "ttlMs": plan.ttl_ms,
            "marginMs": plan.margin_ms,
            "startMs": self.start_ms,
            "events": self.events,
            "history": history,
        });
        Ok(Report::new(json, text))
    }
}

/// The result of a thread of the story; a panic there is the demo's own bug and goes on.
fn joined<T>(thread: std::thread::ScopedJoinHandle<'_, T>) -> T {
    thread
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The tenant's ledger under a tenant root, where gotry keeps it.
fn ledger_path(root: &Path) -> PathBuf {
    root.join("gotry-state").join("gotry-state.db")
}

fn write_ledger(root: &Path) -> Result<(), Failure> {
    let path = ledger_path(root);
    let folder = path.parent().expect("the ledger is in a folder");
    std::fs::create_dir_all(folder).map_err(|error| {
        Failure::io(
            Exit::Storage,
            &error,
            format!("cannot create {}", folder.display()),
            "set TMPDIR to a writable folder",
        )
    })?;
    let write = || -> rusqlite::Result<()> {
        let mut db = rusqlite::Connection::open(&path)?;
        let tx = db.transaction()?;
        tx.execute(
            "CREATE TABLE ledger (seq INTEGER PRIMARY KEY, entry TEXT NOT NULL)",
            [],
        )?;
        for entry in LEDGER {
            tx.execute("INSERT INTO ledger (entry) VALUES (?1)", [entry])?;
        }
        tx.commit()
    };
    write().map_err(|error| ledger_failure(&path, &error))
}

fn read_ledger(root: &Path) -> Result<Vec<String>, Failure> {
    let path = ledger_path(root);
    let read = || -> rusqlite::Result<Vec<String>> {
        let db = rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        let mut entries = db.prepare("SELECT entry FROM ledger ORDER BY seq")?;
        let rows = entries.query_map([], |row| row.get(0))?;
        rows.collect()
    };
    read().map_err(|error| ledger_failure(&path, &error))
}

fn ledger_failure(path: &Path, error: &rusqlite::Error) -> Failure {
    let code = match error {
        rusqlite::Error::SqliteFailure(e, _) => sqlite_code_name(e.extended_code),
        _ => "SQLITE_ERROR",
    };
    Failure::new(
        Exit::Storage,
        code,
        format!("the demo's ledger {}: {error}", path.display()),
        "set TMPDIR to a writable folder on a local disk",
    )
}

/// The durable store as replica-a sees it. Its next put can be held: that is how the demo
/// freezes replica-a in the middle of a copy, after its write gate said yes, as a GC pause or
/// a frozen VM would, and lets it go on once replica-b has taken over.
#[derive(Debug)]
struct Freezable {
    inner: Arc<dyn DurableStore>,
    /// While armed: who to tell that a put is held, and what to wait for before it goes on.
    armed: Mutex<Option<(SyncSender<()>, Receiver<()>)>>,
}

impl Freezable {
    fn new(inner: Arc<dyn DurableStore>) -> Freezable {
        Freezable {
            inner,
            armed: Mutex::new(None),
        }
    }

    fn arm(&self, frozen: SyncSender<()>, wake: Receiver<()>) {
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some((frozen, wake));
    }

    /// Drops a freeze that no put met, which tells a story waiting for one that none will come.
    fn disarm(&self) {
        self.armed.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

impl DurableStore for Freezable {
    fn put_new(&self, key: &str, bytes: &[u8]) -> gotry_tenant_state::Result<PutOutcome> {
        let armed = self.armed.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some((frozen, wake)) = armed {
            // Either side gone means the story ended early: the put goes on.
            let _ = frozen.send(());
            let _ = wake.recv();
        }
        self.inner.put_new(key, bytes)
    }

    fn get(&self, key: &str) -> gotry_tenant_state::Result<Option<Vec<u8>>> {
        self.inner.get(key)
    }

    fn list(&self, prefix: &str) -> gotry_tenant_state::Result<Vec<ObjectInfo>> {
        self.inner.list(prefix)
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
}
