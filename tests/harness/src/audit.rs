//! An independent check of a store's log against the lease rules.
//!
//! Contention and crash runs (in any language, on any store) end here: the log is replayed
//! from nothing, and every grant must have been allowed by the state the log itself
//! implies; every operation a client saw acknowledged must be in the log; the final rows
//! must be what the replay ends with. The replay assumes one TTL for every grant, which the
//! runs use so that expiry can be recomputed from the log alone.

use std::collections::{BTreeMap, HashMap};

use gotry_tenant_state::lease_store::{HistoryEntry, LeaseOp, LeaseRecord};

/// An operation that a client saw granted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Acknowledged {
    pub key: String,
    pub op: LeaseOp,
    pub owner: String,
    pub epoch: i64,
}

/// What the audit found.
#[derive(Debug, Default)]
pub struct AuditReport {
    pub keys: usize,
    pub entries: usize,
    pub acquires: usize,
    pub acknowledged: usize,
    pub violations: Vec<String>,
}

impl AuditReport {
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Replays `history` (in log order) with a TTL of `ttl_ms` for every grant and checks it
/// against the rules, `acknowledged` and `final_records`.
pub fn audit(
    history: &[HistoryEntry],
    ttl_ms: i64,
    acknowledged: &[Acknowledged],
    final_records: &[LeaseRecord],
) -> AuditReport {
    let mut report = AuditReport {
        entries: history.len(),
        acknowledged: acknowledged.len(),
        ..AuditReport::default()
    };
    let mut replayed: BTreeMap<&str, LeaseRecord> = BTreeMap::new();
    let mut logged: HashMap<(&str, LeaseOp, &str, i64), usize> = HashMap::new();
    for (index, entry) in history.iter().enumerate() {
        *logged
            .entry((&entry.key, entry.op, &entry.owner, entry.epoch))
            .or_default() += 1;
        let at = entry.at_ms;
        let mut violation = |what: String| {
            report.violations.push(format!(
                "log entry {index} ({} {} by {} at epoch {}): {what}",
                entry.key,
                entry.op.as_str(),
                entry.owner,
                entry.epoch
            ))
        };
        let current = replayed.get(entry.key.as_str());
        let holds = |row: &LeaseRecord| row.owner == entry.owner && row.epoch == entry.epoch;
        let next = match entry.op {
            LeaseOp::Acquire => {
                report.acquires += 1;
                let expected = current.map_or(1, |row| row.epoch + 1);
                if entry.epoch != expected {
                    violation(format!("epoch should have been {expected}"));
                }
                if let Some(row) = current.filter(|row| !row.is_expired_at(at)) {
                    violation(format!(
                        "granted while epoch {} of {} was unexpired until {}",
                        row.epoch, row.owner, row.lease_until_ms
                    ));
                }
                LeaseRecord {
                    key: entry.key.clone(),
                    owner: entry.owner.clone(),
                    epoch: entry.epoch,
                    lease_until_ms: at + ttl_ms,
                    forgotten_at_epoch: current.map_or(0, |row| row.forgotten_at_epoch),
                }
            }
            LeaseOp::Renew | LeaseOp::Release | LeaseOp::Forget => {
                let Some(row) = current.cloned() else {
                    violation("granted on a key that was never acquired".into());
                    continue;
                };
                if !holds(&row) {
                    violation(format!("the holder was {} at epoch {}", row.owner, row.epoch));
                }
                if entry.op != LeaseOp::Release && row.is_expired_at(at) {
                    violation(format!(
                        "granted after the lease expired at {}",
                        row.lease_until_ms
                    ));
                }
                match entry.op {
                    LeaseOp::Renew => LeaseRecord {
                        lease_until_ms: at + ttl_ms,
                        ..row
                    },
                    LeaseOp::Release => LeaseRecord {
                        lease_until_ms: row.lease_until_ms.min(at),
                        ..row
                    },
                    _ => LeaseRecord {
                        forgotten_at_epoch: row.forgotten_at_epoch.max(entry.epoch),
                        ..row
                    },
                }
            }
        };
        replayed.insert(&entry.key, next);
    }
    report.keys = replayed.len();

    let mut seen: HashMap<(&str, LeaseOp, &str, i64), usize> = HashMap::new();
    for ack in acknowledged {
        let id = (ack.key.as_str(), ack.op, ack.owner.as_str(), ack.epoch);
        let count = seen.entry(id).or_default();
        *count += 1;
        if *count > logged.get(&id).copied().unwrap_or(0) {
            report.violations.push(format!(
                "acknowledged {} of {} by {} at epoch {} is missing from the log",
                ack.op.as_str(),
                ack.key,
                ack.owner,
                ack.epoch
            ));
        }
    }

    if final_records.len() != replayed.len() {
        report.violations.push(format!(
            "the store holds {} rows, the log implies {}",
            final_records.len(),
            replayed.len()
        ));
    }
    for record in final_records {
        match replayed.get(record.key.as_str()) {
            Some(expected) if expected == record => {}
            Some(expected) => report
                .violations
                .push(format!("row {record:?} differs from the replayed {expected:?}")),
            None => report.violations.push(format!("row {} has no log", record.key)),
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, op: LeaseOp, owner: &str, epoch: i64, at_ms: i64) -> HistoryEntry {
        HistoryEntry {
            key: key.into(),
            op,
            owner: owner.into(),
            epoch,
            at_ms,
        }
    }

    fn record(owner: &str, epoch: i64, lease_until_ms: i64, forgotten_at_epoch: i64) -> LeaseRecord {
        LeaseRecord {
            key: "k".into(),
            owner: owner.into(),
            epoch,
            lease_until_ms,
            forgotten_at_epoch,
        }
    }

    fn ack(op: LeaseOp, owner: &str, epoch: i64) -> Acknowledged {
        Acknowledged {
            key: "k".into(),
            op,
            owner: owner.into(),
            epoch,
        }
    }

    #[test]
    fn a_clean_log_passes() {
        let log = [
            entry("k", LeaseOp::Acquire, "a", 1, 0),
            entry("k", LeaseOp::Renew, "a", 1, 50),
            entry("k", LeaseOp::Forget, "a", 1, 60),
            entry("k", LeaseOp::Release, "a", 1, 70),
            entry("k", LeaseOp::Acquire, "b", 2, 70),
        ];
        let acks = [ack(LeaseOp::Renew, "a", 1)];
        let report = audit(&log, 100, &acks, &[record("b", 2, 170, 1)]);
        assert!(report.is_clean(), "{:?}", report.violations);
        assert_eq!((report.keys, report.entries, report.acquires), (1, 5, 2));
    }

    #[test]
    fn each_kind_of_violation_is_reported() {
        let log = [
            entry("k", LeaseOp::Acquire, "a", 1, 0),
            entry("k", LeaseOp::Acquire, "b", 2, 50),
            entry("k", LeaseOp::Acquire, "c", 4, 500),
            entry("k", LeaseOp::Renew, "a", 4, 510),
            entry("k", LeaseOp::Renew, "c", 4, 700),
        ];
        let acks = [ack(LeaseOp::Release, "c", 4)];
        let report = audit(&log, 100, &acks, &[record("c", 4, 1, 0)]);
        let all = report.violations.join("\n");
        assert!(all.contains("unexpired"), "{all}");
        assert!(all.contains("epoch should have been 3"), "{all}");
        assert!(all.contains("the holder was c"), "{all}");
        assert!(all.contains("after the lease expired"), "{all}");
        assert!(all.contains("missing from the log"), "{all}");
        assert!(all.contains("differs from the replayed"), "{all}");
    }
}
