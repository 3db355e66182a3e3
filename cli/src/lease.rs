//! `gotry-tenant lease ...`: inspection and repair of a lease store.
//!
//! Every decision is the store's: a repair names the owner and epoch it acts for, and the
//! store grants or refuses it under the same rules as for a replica.

use std::ffi::OsStr;
use std::sync::Arc;

use gotry_tenant_state::{HistoryEntry, LeaseRecord, LeaseStore};
use serde_json::{json, Value};

use crate::cli::{HolderArgs, LeaseCommand, StoreArg};
use crate::failure::Failure;
use crate::render::{self, printable};
use crate::store::StoreTarget;
use crate::{text_arg, Report};

pub fn run(command: &LeaseCommand) -> Result<Report, Failure> {
    match command {
        LeaseCommand::Read { key, store } => read(store, key),
        LeaseCommand::History { key, limit, store } => history(store, key.as_deref(), *limit),
        LeaseCommand::List {
            held,
            expired,
            prefix,
            store,
        } => {
            let filter = match (held, expired) {
                (true, _) => Some(true),
                (_, true) => Some(false),
                _ => None,
            };
            list(store, prefix.as_deref(), filter)
        }
        LeaseCommand::Compact { store } => compact(store),
        LeaseCommand::Release(args) => release(args),
        LeaseCommand::Forget(args) => forget(args),
    }
}

fn open(store: &StoreArg) -> Result<Arc<dyn LeaseStore>, Failure> {
    StoreTarget::parse(&store.store).open_existing()
}

fn read(store: &StoreArg, key: &OsStr) -> Result<Report, Failure> {
    let key = text_arg("key", key)?;
    let store = open(store)?;
    let record = store.read(key)?;
    let now = store.now_ms()?;
    Ok(match record {
        None => Report::new(Value::Null, format!("no lease recorded for {}\n", printable(key))),
        Some(record) => Report::new(
            render::record_at_json(&record, now),
            describe_record(&record, now),
        ),
    })
}

/// One record for people, one field a line.
fn describe_record(record: &LeaseRecord, now: i64) -> String {
    format!(
        "key        {}\nowner      {}\nepoch      {}\nstate      {}, {} ({})\nforgotten  {}\n",
        printable(&record.key),
        printable(&record.owner),
        record.epoch,
        state(record, now),
        render::expiry(record, now),
        render::utc(record.lease_until_ms),
        match record.forgotten_at_epoch {
            0 => "no durable copy is marked dead".to_owned(),
            epoch => format!("durable copies up to epoch {epoch} are dead"),
        },
    )
}

fn state(record: &LeaseRecord, now: i64) -> &'static str {
    if !record.is_expired_at(now) {
        "held"
    } else {
        "expired"
    }
}

fn history(store: &StoreArg, key: Option<&OsStr>, limit: Option<u64>) -> Result<Report, Failure> {
    let key = key.map(|k| text_arg("key", k)).transpose()?;
    let store = open(store)?;
    let mut entries = store.history(key)?;
    let now = store.now_ms()?;
    if let Some(limit) = limit {
        // A limit beyond the address space keeps everything.
        let keep = usize::try_from(limit).unwrap_or(usize::MAX);
        entries.drain(..entries.len().saturating_sub(keep));
    }
    let json = json!({
        "nowMs": now,
        "entries": entries.iter().map(render::history_json).collect::<Vec<_>>(),
    });
    let text = if entries.is_empty() {
        match key {
            Some(key) => format!("no operations recorded for {}\n", printable(key)),
            None => "no operations recorded\n".to_owned(),
        }
    } else {
        history_table(&entries, now)
    };
    Ok(Report::new(json, text))
}

fn history_table(entries: &[HistoryEntry], now: i64) -> String {
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|entry| {
            vec![
                render::utc(entry.at_ms),
                render::ago(entry.at_ms, now),
                entry.op.as_str().to_owned(),
                printable(&entry.key).into_owned(),
                printable(&entry.owner).into_owned(),
                entry.epoch.to_string(),
            ]
        })
        .collect();
    render::table(&["AT (UTC)", "WHEN", "OP", "KEY", "OWNER", "EPOCH"], &rows)
}

/// `held`: `Some(true)` keeps held leases only, `Some(false)` expired ones only.
fn list(store: &StoreArg, prefix: Option<&OsStr>, held: Option<bool>) -> Result<Report, Failure> {
    let prefix = prefix.map(|p| text_arg("prefix", p)).transpose()?.unwrap_or("");
    let store = open(store)?;
    let mut records = store.list(prefix)?;
    let now = store.now_ms()?;
    if let Some(held) = held {
        records.retain(|record| record.is_expired_at(now) != held);
    }
    let json = json!({
        "nowMs": now,
        "leases": records.iter().map(|r| render::record_at_json(r, now)).collect::<Vec<_>>(),
    });
    if records.is_empty() {
        let which = match held {
            Some(true) => "held ",
            Some(false) => "expired ",
            None => "",
        };
        let scope = if prefix.is_empty() {
            String::new()
        } else {
            format!(" under {}", printable(prefix))
        };
        return Ok(Report::new(json, format!("no {which}leases{scope}\n")));
    }
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|record| {
            vec![
                printable(&record.key).into_owned(),
                printable(&record.owner).into_owned(),
                record.epoch.to_string(),
                state(record, now).to_owned(),
                render::expiry(record, now),
                record.forgotten_at_epoch.to_string(),
            ]
        })
        .collect();
    let held_count = records.iter().filter(|r| !r.is_expired_at(now)).count();
    let mut text = render::table(&["KEY", "OWNER", "EPOCH", "STATE", "EXPIRY", "FORGOTTEN"], &rows);
    let plural = if records.len() == 1 { "" } else { "s" };
    text.push_str(&format!("\n{} lease{plural}, {held_count} held\n", records.len()));
    Ok(Report::new(json, text))
}

/// The three arguments of a repair, checked for text; the store checks the rest.
fn holder(args: &HolderArgs) -> Result<(Arc<dyn LeaseStore>, &str, &str), Failure> {
    let key = text_arg("key", &args.key)?;
    let owner = text_arg("owner", &args.owner)?;
    Ok((open(&args.store)?, key, owner))
}

fn release(args: &HolderArgs) -> Result<Report, Failure> {
    let (store, key, owner) = holder(args)?;
    let record = store.release(key, owner, args.epoch)?;
    let now = store.now_ms()?;
    let text = format!(
        "released {}: epoch {} of {} ended at {}; the next acquire gets epoch {}\n",
        printable(&record.key),
        record.epoch,
        printable(&record.owner),
        render::utc(record.lease_until_ms),
        record.epoch.saturating_add(1),
    );
    Ok(Report::new(render::record_at_json(&record, now), text))
}

fn forget(args: &HolderArgs) -> Result<Report, Failure> {
    let (store, key, owner) = holder(args)?;
    let record = store.mark_forgotten(key, owner, args.epoch)?;
    let now = store.now_ms()?;
    let text = format!(
        "{}: durable copies up to epoch {} are marked dead; {} still holds epoch {}, {}\n",
        printable(&record.key),
        record.forgotten_at_epoch,
        printable(&record.owner),
        record.epoch,
        render::expiry(&record, now),
    );
    Ok(Report::new(render::record_at_json(&record, now), text))
}

/// The store's own pruning of its log, run now over the whole of it.
fn compact(store: &StoreArg) -> Result<Report, Failure> {
    let target = StoreTarget::parse(&store.store);
    let store = target.open_existing()?;
    let deleted = store.compact_log().map_err(|error| {
        Failure::from(error).context(format!("cannot compact the log of {}", target.describe()))
    })?;
    let now = store.now_ms()?;
    let plural = if deleted == 1 { "" } else { "s" };
    let text = format!(
        "deleted {deleted} renewal{plural} older than the store's retention from the log of {}; \
         every acquire, release and forget, and the last renewal of each tenure, are kept\n",
        printable(&target.describe()),
    );
    Ok(Report::new(json!({ "nowMs": now, "deleted": deleted }), text))
}
