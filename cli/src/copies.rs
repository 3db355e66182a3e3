//! `gotry-tenant copies ...`: a tenant's durable copies, listed, verified and restored by the
//! core's `EpochCopies` for an operator.
//!
//! Every verdict is the core's: which copy verifies, which one a restore takes, which epochs
//! are forgotten. The tool adds two guards of its own, both about the operator's request and
//! not about copies: a copy asked for by number must exist (a typo is not a broken copy), and
//! `--to` must be empty unless `--force` (a restore replaces the folder whole).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use gotry_tenant_state::{CopyId, CopyListing, EpochCopies, RestoreReport, SkipReason, SkippedCopy};
use serde_json::json;

use crate::cli::{CopiesCommand, DurableArg};
use crate::durable::DurableTarget;
use crate::failure::{Exit, Failure};
use crate::render::{self, printable, reason_meaning};
use crate::store::StoreTarget;
use crate::{text_arg, Report};

pub fn run(command: &CopiesCommand) -> Result<Report, Failure> {
    match command {
        CopiesCommand::List { key, durable } => list(key, durable),
        CopiesCommand::Verify {
            key,
            epoch,
            seq,
            durable,
        } => {
            let only = epoch.zip(*seq).map(|(epoch, seq)| CopyId { epoch, seq });
            verify(key, only, durable)
        }
        CopiesCommand::Restore {
            key,
            to,
            force,
            below_epoch,
            store,
            durable,
        } => restore(key, to, *force, *below_epoch, store.as_deref(), durable),
    }
}

/// The copies in the store `--durable` names, and how to report that store's failures.
pub struct Opened {
    target: DurableTarget,
    copies: EpochCopies,
    /// The store as its backend names it, credentials masked.
    pub location: String,
}

pub fn open(durable: &DurableArg) -> Result<Opened, Failure> {
    let target = DurableTarget::parse(&durable.durable);
    let store = target.open()?;
    let location = target.mask(&store.location());
    Ok(Opened {
        copies: EpochCopies::new(store),
        target,
        location,
    })
}

impl Opened {
    pub fn listing(&self, key: &str) -> Result<Vec<CopyListing>, Failure> {
        self.copies.list(key).map_err(|e| self.target.failure(e))
    }
}

fn list(key: &OsStr, durable: &DurableArg) -> Result<Report, Failure> {
    let key = text_arg("key", key)?;
    let opened = open(durable)?;
    let listing = opened.listing(key)?;
    // What each complete copy references of earlier ones (a read of its manifest): with what
    // it stored itself, what restoring it fetches.
    let reused = listing
        .iter()
        .map(|copy| match copy.complete {
            true => opened
                .copies
                .reused(key, copy.id)
                .map_err(|e| opened.target.failure(e)),
            false => Ok(None),
        })
        .collect::<Result<Vec<_>, Failure>>()?;
    let json = json!({
        "key": key,
        "durable": opened.location,
        "copies": listing.iter().zip(&reused).map(|(copy, reused)| json!({
            "epoch": copy.id.epoch,
            "seq": copy.id.seq,
            "complete": copy.complete,
            "objects": copy.objects,
            "bytes": copy.bytes,
            "objects_reused": reused.map(|r| r.0),
            "bytes_reused": reused.map(|r| r.1),
        })).collect::<Vec<_>>(),
    });
    let place = format!("{} in {}", printable(key), printable(&opened.location));
    if listing.is_empty() {
        return Ok(Report::new(json, format!("no copies of {place}\n")));
    }
    let rows: Vec<Vec<String>> = listing
        .iter()
        .zip(&reused)
        .map(|(copy, reused)| {
            vec![
                copy.id.epoch.to_string(),
                copy.id.seq.to_string(),
                if copy.complete { "yes" } else { "no" }.to_owned(),
                copy.objects.to_string(),
                copy.bytes.to_string(),
                reused.map_or_else(|| "-".to_owned(), |r| r.1.to_string()),
            ]
        })
        .collect();
    let mut text = render::table(
        &["EPOCH", "SEQ", "COMPLETE", "OBJECTS", "BYTES", "REUSED BYTES"],
        &rows,
    );
    let complete = listing.iter().filter(|copy| copy.complete).count();
    text.push_str(&format!(
        "\n{} of {place}, {complete} complete\n",
        count(listing.len(), "copy", "copies")
    ));
    Ok(Report::new(json, text))
}

fn verify(key: &OsStr, only: Option<CopyId>, durable: &DurableArg) -> Result<Report, Failure> {
    let key = text_arg("key", key)?;
    let opened = open(durable)?;
    let listing = opened.listing(key)?;
    let ids: Vec<CopyId> = match only {
        Some(id) if !listing.iter().any(|copy| copy.id == id) => {
            return Err(Failure::new(
                Exit::Invalid,
                "ERR_NO_SUCH_COPY",
                format!(
                    "{key} has no copy of epoch {} seq {} in {}",
                    id.epoch, id.seq, opened.location
                ),
                "see the copies with `gotry-tenant copies list KEY`",
            ));
        }
        Some(id) => vec![id],
        None => listing
            .iter()
            .filter(|copy| copy.complete)
            .map(|copy| copy.id)
            .collect(),
    };
    let mut verdicts = Vec::with_capacity(ids.len());
    for id in ids {
        let verdict = opened
            .copies
            .verify(key, id, None)
            .map_err(|e| opened.target.failure(e))?;
        verdicts.push((id, verdict));
    }
    if let (Some(_), [(id, Some(reason))]) = (only, verdicts.as_slice()) {
        return Err(Failure::new(
            Exit::Unverified,
            "ERR_COPY_INVALID",
            format!(
                "{key}: the copy of epoch {} seq {} does not verify: {reason} ({})",
                id.epoch,
                id.seq,
                reason_meaning(*reason)
            ),
            "a restore passes over it; see every copy's verdict with `gotry-tenant copies verify KEY`",
        )
        .skipped(&[SkippedCopy {
            id: *id,
            reason: *reason,
        }]));
    }
    let json = json!({
        "key": key,
        "durable": opened.location,
        "copies": verdicts.iter().map(|(id, reason)| json!({
            "epoch": id.epoch,
            "seq": id.seq,
            "ok": reason.is_none(),
            "reason": reason.map(SkipReason::as_str),
        })).collect::<Vec<_>>(),
    });
    let place = format!("{} in {}", printable(key), printable(&opened.location));
    if verdicts.is_empty() {
        return Ok(Report::new(json, format!("no complete copies of {place}\n")));
    }
    let rows: Vec<Vec<String>> = verdicts
        .iter()
        .map(|(id, reason)| {
            let verdict = match reason {
                None => "ok".to_owned(),
                Some(reason) => format!("{reason}: {}", reason_meaning(*reason)),
            };
            vec![id.epoch.to_string(), id.seq.to_string(), verdict]
        })
        .collect();
    let mut text = render::table(&["EPOCH", "SEQ", "VERDICT"], &rows);
    let ok = verdicts.iter().filter(|(_, reason)| reason.is_none()).count();
    text.push_str(&format!(
        "\n{} of {place} checked, {ok} verif{}\n",
        count(verdicts.len(), "copy", "copies"),
        if ok == 1 { "ies" } else { "y" }
    ));
    let incomplete = listing.iter().filter(|copy| !copy.complete).count();
    if only.is_none() && incomplete > 0 {
        text.push_str(&format!(
            "{} without a manifest not checked: no restore considers {}\n",
            count(incomplete, "copy", "copies"),
            if incomplete == 1 { "it" } else { "them" }
        ));
    }
    Ok(Report::new(json, text))
}

fn restore(
    key: &OsStr,
    to: &Path,
    force: bool,
    below_epoch: Option<i64>,
    store: Option<&OsStr>,
    durable: &DurableArg,
) -> Result<Report, Failure> {
    let key = text_arg("key", key)?;
    let to = restore_target(to, force)?;
    let opened = open(durable)?;
    // The floor is the lease store's; without one, nothing is known to be forgotten.
    let floor = match store {
        None => None,
        Some(store) => {
            let record = StoreTarget::parse(store).open_existing()?.read(key)?;
            Some(record.map_or(0, |record| record.forgotten_at_epoch))
        }
    };
    let report = opened
        .copies
        .restore_latest(key, floor.unwrap_or(0), below_epoch, &to, None)
        .map_err(|error| {
            let failure = opened.target.failure(error);
            if failure.exit == Exit::Storage {
                failure.hint("check that this user can create and write the folder --to names")
            } else {
                failure
            }
        })?;
    Ok(restore_report(
        key,
        &to,
        &opened.location,
        floor,
        below_epoch,
        &report,
    ))
}

/// `--to` made absolute (so the report names the folder wherever it is read), and refused
/// when it holds anything and `--force` was not given: the restore puts the copy in its place
/// and deletes what was there.
fn restore_target(to: &Path, force: bool) -> Result<PathBuf, Failure> {
    gotry_tenant_state::paths::assert_root("--to", to)?;
    let to = std::path::absolute(to).map_err(|error| {
        Failure::io(
            Exit::Invalid,
            &error,
            format!("cannot resolve {}", to.display()),
            "pass --to with an absolute path",
        )
    })?;
    let unreadable = |error: std::io::Error| {
        Failure::io(
            Exit::Storage,
            &error,
            format!("cannot read {}", to.display()),
            "check that this user can read the folder --to names",
        )
    };
    match std::fs::symlink_metadata(&to) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(to),
        Err(error) => Err(unreadable(error)),
        Ok(meta) if meta.is_dir() => {
            let empty = std::fs::read_dir(&to).map_err(unreadable)?.next().is_none();
            if empty || force {
                Ok(to)
            } else {
                Err(Failure::new(
                    Exit::Invalid,
                    "ENOTEMPTY",
                    format!("{} is not empty", to.display()),
                    "name a new or empty folder, or pass --force to replace what it holds",
                ))
            }
        }
        // A link would be replaced itself, not the folder it points to.
        Ok(_) => Err(Failure::new(
            Exit::Invalid,
            "ENOTDIR",
            format!("{} is not a folder", to.display()),
            "--to names a folder (a symbolic link is not followed)",
        )),
    }
}

fn restore_report(
    key: &str,
    to: &Path,
    location: &str,
    floor: Option<i64>,
    below_epoch: Option<i64>,
    report: &RestoreReport,
) -> Report {
    let json = json!({
        "key": key,
        "durable": location,
        "to": to.display().to_string(),
        "forgottenAtEpoch": floor.unwrap_or(0),
        "belowEpoch": below_epoch,
        "restored": report.restored.map(|id| json!({ "epoch": id.epoch, "seq": id.seq })),
        "files": report.files,
        "bytes": report.bytes,
        "skipped": report.skipped.iter().map(render::skipped_json).collect::<Vec<_>>(),
    });
    let (key, to) = (printable(key), to.display().to_string());
    let mut text = match report.restored {
        Some(id) => format!(
            "restored {key} from the copy of epoch {} seq {} into {}: {}, {} bytes\n",
            id.epoch,
            id.seq,
            printable(&to),
            count(report.files, "file", "files"),
            report.bytes
        ),
        None => format!(
            "no copy of {key} to restore: {} is an empty start\n",
            printable(&to)
        ),
    };
    text.push_str(&format!("  durable    {}\n", printable(location)));
    text.push_str(&match floor {
        None => "  forgotten  no copy left out (without --store no forgotten epoch is known)\n".to_owned(),
        Some(0) => "  forgotten  no copy left out (the lease store marks none dead)\n".to_owned(),
        Some(epoch) => format!("  forgotten  copies up to epoch {epoch} left out, as the lease store says\n"),
    });
    if let Some(below) = below_epoch {
        text.push_str(&format!("  below      only copies of epochs below {below}\n"));
    }
    if !report.skipped.is_empty() {
        let rows: Vec<Vec<String>> = report
            .skipped
            .iter()
            .map(|copy| {
                vec![
                    copy.id.epoch.to_string(),
                    copy.id.seq.to_string(),
                    format!("{}: {}", copy.reason, reason_meaning(copy.reason)),
                ]
            })
            .collect();
        text.push_str("\npassed over, newest first:\n");
        for line in render::table(&["EPOCH", "SEQ", "REASON"], &rows).lines() {
            text.push_str(&format!("  {line}\n"));
        }
    }
    Report::new(json, text)
}

/// `1 copy`, `3 copies`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
