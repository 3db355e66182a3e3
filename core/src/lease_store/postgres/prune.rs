//! Pruning the lease log by the other stores' rule: every acquire, release and forget
//! stays, and so does every renewal within the retention; beyond it, only the last renewal
//! of each tenure (key, epoch), so that an audit still sees how far each epoch was renewed.

use super::*;

/// Rows one transaction of `compact_log` judges.
pub(super) const COMPACT_BATCH: usize = 4_096;

/// Server refusals that say this user may not do what pruning needs: a privilege it lacks,
/// or a guard that refuses the delete.
const REFUSED: [&str; 2] = ["42501", "P0001"];

impl Inner {
    /// Remembers that the server refused what pruning needs, when `failure` says so: the
    /// store then stops trying (until it is opened again) and `compact_log` says why.
    pub(super) fn note_refusal(&self, failure: Failure) -> Failure {
        let refused =
            matches!(&failure, Failure::Db(e) if e.code().is_some_and(|c| REFUSED.contains(&c.code())));
        if !refused {
            return failure;
        }
        match self.endpoint.error(failure) {
            Error::Storage { code, message } => {
                let message = format!(
                    "the lease log in {} is not pruned: pruning needs DELETE on the log and UPDATE on \
                     its mark table (the server said: {message})",
                    self.endpoint.shown
                );
                *self.unprunable.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((code.clone(), message.clone()));
                Failure::Core(Error::Storage { code, message })
            }
            other => Failure::Core(other),
        }
    }

    fn refusal(&self) -> Option<Error> {
        self.unprunable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(code, message)| Error::Storage {
                code: code.clone(),
                message: message.clone(),
            })
    }

    /// After a write that logged `logged` entries committed: prunes about twice as many
    /// rows in a short transaction of its own, so that the lease rows' locks are never held
    /// for it. It spends at most half of the time the call has left, and nothing when the
    /// write already took more than half the timeout; whatever fails is dropped (the
    /// write's answer stands), and a session it left unfit is not reused.
    pub(super) async fn prune_after_write(
        &self,
        session: &mut Session,
        now: i64,
        logged: usize,
        until: Instant,
    ) {
        if logged == 0 || self.refusal().is_some() {
            return;
        }
        let left = until.saturating_duration_since(Instant::now());
        if left < self.endpoint.timeout / 2 {
            return;
        }
        let budget = (2 * logged).max(PRUNE_MIN_BATCH);
        match tokio::time::timeout(left / 2, self.prune_batch(session, now, budget)).await {
            Ok(Ok(_)) => {}
            Ok(Err(failure)) => {
                session.discard = failure.breaks_connection();
                self.note_refusal(failure);
            }
            // Cut short inside its transaction.
            Err(_) => session.discard = true,
        }
    }

    /// One transaction of pruning: takes the mark (a second pruner skips), judges up to
    /// `budget` log rows after it in log order, deletes the renewals among them that a
    /// later renewal of the same tenure follows, and moves the mark past them. Stops at
    /// the first row inside the retention. Returns the rows judged and deleted.
    ///
    /// Identities are handed out at insert, not at commit, so a row of a transaction still
    /// open can be invisible while later ones are not: the mark then passes it and it is
    /// never judged, which keeps a renewal too many, never deletes one too many (a row goes
    /// only when it and a later renewal of its tenure were both seen committed).
    pub(super) async fn prune_batch(
        &self,
        session: &Session,
        now: i64,
        budget: usize,
    ) -> Result<(usize, u64), Failure> {
        let client = &session.client;
        let cutoff = now.saturating_sub(self.log_retention_ms);
        let budget = budget as i64;
        let budget_param: [(&(dyn ToSql + Sync), Type); 1] = [(&budget, Type::INT8)];
        let (begun, mark, rows) = futures::join!(
            client.batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED"),
            client.query_typed(&self.sql.lock_mark, &[]),
            client.query_typed(&self.sql.rows_after_mark, &budget_param)
        );
        let judged = async {
            begun?;
            if mark?.is_empty() {
                return Ok(None);
            }
            let (mut through, mut renewals, mut count) = (None, Vec::new(), 0usize);
            for row in rows? {
                let get = || -> Result<(i64, String, i64), tokio_postgres::Error> {
                    Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
                };
                let (id, op, at_ms) = get().map_err(|_| invalid_row(&self.sql.log))?;
                if at_ms >= cutoff {
                    break;
                }
                through = Some(id);
                count += 1;
                if op == LeaseOp::Renew.as_str() {
                    renewals.push(id);
                }
            }
            Ok(through.map(|through| (through, renewals, count)))
        }
        .await;
        let Some((through, renewals, count)) = end(client, judged).await? else {
            client.batch_execute("ROLLBACK").await?;
            return Ok((0, 0));
        };
        let renewals_param: [(&(dyn ToSql + Sync), Type); 1] = [(&renewals, Type::INT8_ARRAY)];
        let through_param: [(&(dyn ToSql + Sync), Type); 1] = [(&through, Type::INT8)];
        let (deleted, marked, committed) = futures::join!(
            client.execute_typed(&self.sql.delete_followed, &renewals_param),
            client.execute_typed(&self.sql.set_mark, &through_param),
            client.batch_execute("COMMIT")
        );
        let deleted = settle(deleted.and_then(|deleted| marked.map(|_| deleted)), committed)?;
        Ok((count, deleted))
    }
}

impl PostgresLeaseStore {
    /// [`LeaseStore::compact_log`]: transactions of a few thousand rows each, all within
    /// the call's one timeout. A log too long for that is compacted by several calls: each
    /// keeps what its batches did.
    pub(super) fn compact(&self) -> Result<u64> {
        if let Some(refusal) = self.inner.refusal() {
            return Err(refusal);
        }
        let deadline = Deadline::after(self.inner.endpoint.timeout);
        let mut deleted = 0u64;
        loop {
            let (judged, gone) = match self.call(deadline, Job::CompactBatch) {
                Ok(Answer::Compacted(judged, gone)) => (judged, gone),
                Ok(_) => return Err(unexpected()),
                Err(Error::LeaseStoreUnavailable { message }) if deleted > 0 => {
                    return Err(Error::unavailable(format!(
                        "{message} (this call deleted {deleted} log rows first; call again to go on)"
                    )))
                }
                Err(other) => return Err(other),
            };
            deleted += gone;
            if judged < COMPACT_BATCH {
                return Ok(deleted);
            }
        }
    }
}
