//! `gotry-tenant router status`: what routers serve, as the stores show it.
//!
//! A `TenantRouter` lives inside its host process, and its own status (in-flight calls, copy
//! lag) is the host's to expose. What every router leaves behind is in the two stores it
//! shares with the others: the lease store says who holds each tenant and at which epoch,
//! the durable store which copies each tenure wrote. This command puts the two side by side,
//! one row per lease, without deciding anything: the state is the core's
//! ([`LeaseState::of`]), and the newest complete copy is the core's listing (`EpochCopies::list`),
//! verified by nothing (`copies verify` does that).

use std::ffi::OsStr;

use gotry_tenant_state::{assert_organization_id, metrics, CopyListing, LeaseRecord, LeaseState};
use serde_json::{json, Value};

use crate::cli::{DurableArg, RouterCommand, StoreArg};
use crate::copies;
use crate::failure::Failure;
use crate::render::{self, printable};
use crate::store::StoreTarget;
use crate::{text_arg, Report};

pub fn run(command: &RouterCommand) -> Result<Report, Failure> {
    match command {
        RouterCommand::Status {
            org,
            store,
            durable,
            metrics,
        } => status(org.as_deref(), store, durable, *metrics),
    }
}

/// One row: a lease and the copies of its key.
struct Tenant {
    record: LeaseRecord,
    state: LeaseState,
    newest: Option<CopyListing>,
    copies: usize,
    complete: usize,
}

fn status(
    org: Option<&OsStr>,
    store: &StoreArg,
    durable: &DurableArg,
    metrics: bool,
) -> Result<Report, Failure> {
    let org = match org {
        Some(org) => Some(assert_organization_id(text_arg("organization id", org)?)?),
        None => None,
    };
    let prefix = org.map(|org| format!("{org}/")).unwrap_or_default();
    let leases = StoreTarget::parse(&store.store).open_existing()?;
    let opened = copies::open(durable)?;
    let records = leases.list(&prefix)?;
    let now = leases.now_ms()?;
    let mut tenants = Vec::with_capacity(records.len());
    for record in records {
        let state = LeaseState::of(leases.as_ref(), &record, now)?;
        let listing = opened.listing(&record.key)?;
        tenants.push(Tenant {
            state,
            newest: newest_complete(&listing),
            copies: listing.len(),
            complete: listing.iter().filter(|copy| copy.complete).count(),
            record,
        });
    }
    if metrics {
        return Ok(Report {
            json: None,
            text: metrics_text(&tenants),
        });
    }
    let json = json!({
        "nowMs": now,
        "organization": org,
        "durable": opened.location,
        "tenants": tenants.iter().map(|t| tenant_json(t, now)).collect::<Vec<_>>(),
    });
    Ok(Report::new(json, text(&tenants, org, &opened.location, now)))
}

/// The copy with the highest epoch, then sequence, whose manifest is written.
fn newest_complete(listing: &[CopyListing]) -> Option<CopyListing> {
    listing
        .iter()
        .filter(|copy| copy.complete)
        .max_by_key(|copy| copy.id)
        .cloned()
}

fn tenant_json(tenant: &Tenant, now: i64) -> Value {
    let record = &tenant.record;
    let mut value = render::record_at_json(record, now);
    value["state"] = tenant.state.as_str().into();
    value["newestCopy"] = match &tenant.newest {
        None => Value::Null,
        Some(copy) => json!({
            "epoch": copy.id.epoch,
            "seq": copy.id.seq,
            "currentEpoch": copy.id.epoch == record.epoch,
            "forgotten": copy.id.epoch <= record.forgotten_at_epoch,
        }),
    };
    value["copies"] = tenant.copies.into();
    value["completeCopies"] = tenant.complete.into();
    value
}

/// The stores' view as gauges: what a host's own metrics cannot show, since no one process
/// sees every replica's leases and copies.
fn metrics_text(tenants: &[Tenant]) -> String {
    let states = LeaseState::ALL;
    let counts = states.map(|state| tenants.iter().filter(|t| t.state == state).count() as f64);
    let labels = states.map(|state| [("state", state.as_str())]);
    let by_state: Vec<(&[(&str, &str)], f64)> = labels.iter().map(|l| &l[..]).zip(counts).collect();
    let mut out = String::new();
    metrics::encode_gauge(
        &mut out,
        "gotry_tenant_store_leases",
        "Leases in the lease store, by state on the store's clock.",
        &by_state,
    );
    metrics::encode_gauge(
        &mut out,
        "gotry_tenant_store_leases_behind",
        "Held leases whose holder has written no complete copy of its own epoch yet.",
        &[(&[], held_behind(tenants) as f64)],
    );
    let complete: usize = tenants.iter().map(|t| t.complete).sum();
    let all: usize = tenants.iter().map(|t| t.copies).sum();
    metrics::encode_gauge(
        &mut out,
        "gotry_tenant_store_copies",
        "Copies in the durable store of the leases listed, complete (manifest written) or not.",
        &[
            (&[("complete", "true")], complete as f64),
            (&[("complete", "false")], (all - complete) as f64),
        ],
    );
    out
}

/// Held leases whose newest complete copy is not of their epoch.
fn held_behind(tenants: &[Tenant]) -> usize {
    tenants
        .iter()
        .filter(|t| {
            t.state == LeaseState::Held && t.newest.as_ref().map(|c| c.id.epoch) != Some(t.record.epoch)
        })
        .count()
}

fn text(tenants: &[Tenant], org: Option<&str>, location: &str, now: i64) -> String {
    let place = match org {
        Some(org) => format!("of {} ", printable(org)),
        None => String::new(),
    };
    if tenants.is_empty() {
        return format!("no leases {place}in the lease store\n");
    }
    let rows: Vec<Vec<String>> = tenants
        .iter()
        .map(|tenant| {
            let record = &tenant.record;
            let state = match tenant.state {
                LeaseState::Held => format!("held by {}", printable(&record.owner)),
                other => other.as_str().to_owned(),
            };
            let (newest, current) = match &tenant.newest {
                None => ("none".to_owned(), "-".to_owned()),
                Some(copy) => {
                    let mut newest = format!("epoch {} seq {}", copy.id.epoch, copy.id.seq);
                    if copy.id.epoch <= record.forgotten_at_epoch {
                        newest.push_str(" (forgotten)");
                    }
                    let current = if copy.id.epoch == record.epoch {
                        "yes"
                    } else {
                        "no"
                    };
                    (newest, current.to_owned())
                }
            };
            let copies = match tenant.copies - tenant.complete {
                0 => tenant.copies.to_string(),
                incomplete => format!("{} ({incomplete} incomplete)", tenant.copies),
            };
            vec![
                printable(&record.key).into_owned(),
                state,
                record.epoch.to_string(),
                printable(&record.owner).into_owned(),
                render::expiry(record, now),
                newest,
                current,
                copies,
            ]
        })
        .collect();
    let mut text = render::table(
        &[
            "KEY",
            "STATE",
            "EPOCH",
            "OWNER",
            "EXPIRY",
            "NEWEST COPY",
            "CURRENT",
            "COPIES",
        ],
        &rows,
    );
    let held = tenants.iter().filter(|t| t.state == LeaseState::Held).count();
    let behind = held_behind(tenants);
    let plural = if tenants.len() == 1 { "" } else { "s" };
    text.push_str(&format!(
        "\n{} lease{plural} {place}({held} held, {behind} of them without a copy of their own epoch yet); copies in {}\n",
        tenants.len(),
        printable(location),
    ));
    text
}
