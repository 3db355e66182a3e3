//! Pruning the lease log by the SQLite store's rule: every acquire, release and forget
//! stays, and so does every renewal within the retention; beyond it, only the last renewal
//! of each tenure (key, epoch), so that an audit still sees how far each epoch was renewed.

use std::collections::HashSet;

use super::*;

/// Rows one transaction of `compact_log` judges.
const COMPACT_BATCH: usize = 4_096;
/// Tenures whose later renewals one statement looks for.
const TENURE_CHUNK: usize = 100;
/// Log rows deleted by one statement.
const DELETE_CHUNK: usize = 1_000;

/// Why the store does not prune its log: what the server refused, kept to tell
/// `compact_log`'s callers.
pub(super) struct Refusal {
    code: String,
    message: String,
}

impl Refusal {
    pub(super) fn error(&self) -> Error {
        Error::Storage {
            code: self.code.clone(),
            message: self.message.clone(),
        }
    }
}

/// Whether a pruner waits for the mark another one holds.
#[derive(Clone, Copy)]
enum Turn {
    /// A write's pruning: skipped when another session prunes, never waited for.
    Skip,
    /// `compact_log`: waits, since a write's pruning is short.
    Wait,
}

/// Server refusals that say this user may not do what pruning needs: a privilege it lacks
/// (to create the mark table or the guard, or to delete from the log), or a guard that
/// refuses the delete (the old one, put back by an earlier version of this store).
const REFUSED: [u16; 6] = [1044, 1142, 1143, 1227, 1419, 1644];

impl MysqlLeaseStore {
    pub(super) fn unprunable(&self) -> MutexGuard<'_, Option<Refusal>> {
        // Only ever replaced whole, so a poisoned lock holds no torn state.
        self.unprunable
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Remembers that the server refused what pruning needs, when `failure` says so: the
    /// store then stops trying (until it is opened again) and `compact_log` says why, with
    /// the error returned here.
    pub(super) fn note_refusal(&self, failure: &Failure, why: &str) -> Option<Error> {
        let Failure::Db(mysql::Error::MySqlError(server)) = failure else {
            return None;
        };
        if !REFUSED.contains(&server.code) {
            return None;
        }
        let why = match server.code {
            1644 => {
                "the log's delete guard refuses it (the guard of an earlier version, which refuses \
                 every delete, is in place again: opening the store as a user with the TRIGGER \
                 privilege replaces it)"
            }
            _ => why,
        };
        let said = match self
            .endpoint
            .error(Failure::Db(mysql::Error::MySqlError(server.clone())))
        {
            Error::Storage { code, message } => Refusal {
                message: format!(
                    "the lease log in {} is not pruned: {why} (the server said: {message})",
                    self.endpoint.shown
                ),
                code,
            },
            _ => return None,
        };
        let error = said.error();
        *self.unprunable() = Some(said);
        Some(error)
    }

    /// After a write that logged `logged` entries committed, on its connection: prunes
    /// about twice as many rows in a short transaction of its own, so that the lease rows'
    /// locks are never held for it. It spends at most half of the time the call has left,
    /// and nothing when the write already took more than half the timeout; whatever fails
    /// is dropped (the write's answer stands), except that a broken connection is not
    /// reused.
    pub(super) fn prune_after_write(&self, link: &mut Link<'_>, now: i64, logged: usize) {
        if logged == 0 || self.unprunable().is_some() {
            return;
        }
        let Some(left) = link
            .deadline
            .left()
            .filter(|left| *left >= self.endpoint.timeout / 2)
        else {
            return;
        };
        let mut prune = Link {
            conn: &mut *link.conn,
            deadline: link.deadline.capped(left / 2),
            discard: false,
        };
        let budget = (2 * logged).max(PRUNE_MIN_BATCH);
        if let Err(failure) = self.prune_batch(&mut prune, now, budget, Turn::Skip) {
            self.note_refusal(&failure, PRUNE_NEEDS);
            link.discard = failure.breaks_connection();
        }
    }

    /// [`LeaseStore::compact_log`]: transactions of a few thousand rows each, so that no
    /// writer waits long for any of them, all within the call's one timeout. A log too long
    /// for that is compacted by several calls: each keeps what its batches did.
    pub(super) fn compact(&self) -> Result<u64> {
        if let Some(refusal) = self.unprunable().as_ref() {
            return Err(refusal.error());
        }
        let deadline = Deadline::after(self.endpoint.timeout);
        let mut deleted = 0u64;
        loop {
            let batch = self.run_until(deadline, |link| {
                let now = self.clock_now(link)?;
                self.prune_batch(link, now, COMPACT_BATCH, Turn::Wait)
                    .map_err(|failure| {
                        self.note_refusal(&failure, PRUNE_NEEDS)
                            .map_or(failure, Failure::Core)
                    })
            });
            let (judged, gone) = batch.map_err(|error| match error {
                Error::LeaseStoreUnavailable { message } if deleted > 0 => Error::unavailable(format!(
                    "{message} (this call deleted {deleted} log rows first; call again to go on)"
                )),
                other => other,
            })?;
            deleted += gone;
            if judged < COMPACT_BATCH {
                return Ok(deleted);
            }
        }
    }

    /// One transaction of pruning: takes the mark (one row; a second pruner skips or
    /// waits, as `turn` says), judges up to `budget` log rows after it in log order, deletes
    /// the renewals among them that a later renewal of the same tenure follows, and moves
    /// the mark past them. Stops at the first row inside the retention: it is judged once
    /// it is old. Returns the rows judged and deleted.
    ///
    /// InnoDB hands out ids when rows are inserted, not when they commit, so a row of a
    /// transaction still open can be invisible here while later ids are not: the mark then
    /// passes it, and it is never judged. Nothing goes wrong: a row is deleted only once it
    /// was read and a later renewal of its tenure was read too, so an unjudged row merely
    /// stays (a renewal too many). And with a retention longer than a call's timeout it is
    /// rare: the rows judged are older than the retention, so the hidden one belongs to a
    /// transaction open for longer than that, which only a session its client abandoned
    /// mid-transaction keeps (the server rolls it back when it notices, and the row never
    /// was).
    fn prune_batch(
        &self,
        link: &mut Link<'_>,
        now: i64,
        budget: usize,
        turn: Turn,
    ) -> Result<(usize, u64), Failure> {
        let cutoff = now.saturating_sub(self.log_retention_ms);
        transaction(link, |link| {
            // The mark table is made empty: its row is made by the first pruner, and then
            // taken as any other time.
            let start = match self.lock_mark(link, turn)? {
                Some(start) => start,
                None => {
                    link.query_drop(&self.sql.insert_mark)?;
                    self.lock_mark(link, turn)?
                        .ok_or_else(|| invalid_row(&self.sql.pruned))?
                }
            };
            let rows = link.exec_opt::<(u64, Vec<u8>, i64, String, i64)>(
                &self.sql.rows_after_mark,
                Params::from((start, budget as u64)),
            )?;
            let mut renewals: Vec<(u64, Vec<u8>, i64)> = Vec::new();
            let mut through = start;
            let mut count = 0;
            for row in rows {
                let (id, key, epoch, op, at_ms) = row.map_err(|_| invalid_row(&self.sql.log))?;
                if at_ms >= cutoff {
                    break;
                }
                (through, count) = (id, count + 1);
                if op == LeaseOp::Renew.as_str() {
                    renewals.push((id, key, epoch));
                }
            }
            if count == 0 {
                return Ok((0, 0));
            }
            let doomed = self.followed_renewals(link, &renewals)?;
            let mut deleted = 0;
            for chunk in doomed.chunks(DELETE_CHUNK) {
                link.query_drop(&self.sql.delete_log_rows(chunk))?;
                deleted += link.conn.affected_rows();
            }
            link.exec_drop(&self.sql.set_mark, Params::from((through,)))?;
            Ok((count, deleted))
        })
    }

    /// How far the log was judged, with the mark locked until this transaction ends;
    /// `None` when the mark has no row yet.
    fn lock_mark(&self, link: &mut Link<'_>, turn: Turn) -> Result<Option<u64>, Failure> {
        let lock = match turn {
            Turn::Skip => &self.sql.lock_mark_nowait,
            Turn::Wait => &self.sql.lock_mark,
        };
        link.exec_first_opt::<u64>(lock, Params::Empty)?
            .map(|start| start.map_err(|_| invalid_row(&self.sql.pruned)))
            .transpose()
    }

    /// The ids among `renewals` (id, key, epoch; in log order) that a later renewal of the
    /// same tenure follows. Within the batch, each tenure's earlier renewals are followed by
    /// its last one; whether that last one is followed is asked of the log, a statement for
    /// many tenures.
    fn followed_renewals(
        &self,
        link: &mut Link<'_>,
        renewals: &[(u64, Vec<u8>, i64)],
    ) -> Result<Vec<u64>, Failure> {
        let mut last: HashMap<(&[u8], i64), u64> = HashMap::new();
        for (id, key, epoch) in renewals {
            last.insert((key.as_slice(), *epoch), *id);
        }
        let tenures: Vec<(&[u8], i64, u64)> =
            last.iter().map(|(&(key, epoch), &id)| (key, epoch, id)).collect();
        let mut followed: HashSet<u64> = HashSet::new();
        for chunk in tenures.chunks(TENURE_CHUNK) {
            for answer in link.query_opt::<(u64, i64)>(&self.sql.later_renewals(chunk))? {
                let (n, later) = answer.map_err(|_| invalid_row(&self.sql.log))?;
                let (_, _, id) = usize::try_from(n)
                    .ok()
                    .and_then(|n| chunk.get(n))
                    .ok_or_else(|| invalid_row(&self.sql.log))?;
                if later != 0 {
                    followed.insert(*id);
                }
            }
        }
        Ok(renewals
            .iter()
            .filter(|(id, key, epoch)| last[&(key.as_slice(), *epoch)] != *id || followed.contains(id))
            .map(|(id, _, _)| *id)
            .collect())
    }
}

/// What a write's pruning needs of the server, for the error that says it is refused.
const PRUNE_NEEDS: &str = "pruning needs the DELETE privilege on the log and UPDATE on its mark table";
