//! Shared pieces of the cross-process runs: the acknowledgement files every worker writes,
//! in any language, one JSON object per line:
//! `{"key":"k3","op":"acquire","owner":"c-1","epoch":7}`.

pub mod audit;
pub mod crash_copies;

use std::collections::HashMap;
use std::path::Path;

use crate::audit::Acknowledged;
use gotry_tenant_state::LeaseOp;

/// A worker's command line: every flag is `--name value`, in any order.
pub struct Flags(HashMap<String, String>);

impl Flags {
    pub fn from_args() -> Result<Flags, String> {
        let mut map = HashMap::new();
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let value = args.next().ok_or(format!("{flag} needs a value"))?;
            map.insert(flag.trim_start_matches("--").to_owned(), value);
        }
        Ok(Flags(map))
    }

    pub fn get(&self, name: &str) -> Option<&String> {
        self.0.get(name)
    }

    /// The value of a flag that has no default.
    pub fn text(&self, name: &str) -> Result<String, String> {
        self.get(name).cloned().ok_or(format!("--{name} is required"))
    }
}

/// Reads one acknowledgement file. A torn last line (a worker killed mid-write) is not an
/// acknowledgement the worker could have acted on, so it is skipped; any other bad line
/// is an error.
pub fn read_acks(path: &Path) -> Result<Vec<Acknowledged>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let lines: Vec<&str> = text.lines().collect();
    let complete = if text.ends_with('\n') {
        lines.len()
    } else {
        lines.len().saturating_sub(1)
    };
    lines[..complete]
        .iter()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| parse_ack(line).map_err(|e| format!("{}:{}: {e}", path.display(), n + 1)))
        .collect()
}

fn parse_ack(line: &str) -> Result<Acknowledged, String> {
    let value: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let text = |name: &str| {
        value[name]
            .as_str()
            .map(str::to_owned)
            .ok_or(format!("no string {name}"))
    };
    let op = text("op")?;
    Ok(Acknowledged {
        key: text("key")?,
        op: LeaseOp::parse(&op).ok_or(format!("unknown op {op:?}"))?,
        owner: text("owner")?,
        epoch: value["epoch"].as_i64().ok_or("no integer epoch")?,
    })
}

/// One acknowledgement as a line of an acknowledgement file.
pub fn ack_line(key: &str, op: LeaseOp, owner: &str, epoch: i64) -> String {
    serde_json::json!({"key": key, "op": op.as_str(), "owner": owner, "epoch": epoch}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_round_trip_and_a_torn_tail_is_skipped() {
        let dir = std::env::temp_dir().join(format!("acks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.jsonl");
        let line = ack_line("k", LeaseOp::Renew, "o", 3);
        std::fs::write(&path, format!("{line}\n{line}\n{{\"key\":\"k\",\"op")).unwrap();
        let acks = read_acks(&path).unwrap();
        assert_eq!(acks.len(), 2);
        assert_eq!(
            (acks[0].op, acks[0].epoch, acks[0].owner.as_str()),
            (LeaseOp::Renew, 3, "o")
        );
        std::fs::write(&path, "not json\n").unwrap();
        assert!(read_acks(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
