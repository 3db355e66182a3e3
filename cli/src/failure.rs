//! Exit statuses and the one-line report of a failure.
//!
//! Scripts branch on the exit status, so each status stands for one kind of outcome that
//! calls for a different reaction (wait, fix the input, retry later, repair the store, look
//! at the copies). The status follows the kind of the core's error; the CLI never
//! reinterprets what the store decided.

use std::io;

use gotry_tenant_state::{Error, SkippedCopy};
use serde_json::{json, Map, Value};

use crate::render;
use gotry_tenant_state::secrets;

/// The exit statuses of `gotry-tenant`, besides 0 for success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Failure,
    Usage,
    Held,
    Lost,
    Invalid,
    Unavailable,
    Storage,
    Unverified,
}

impl Exit {
    pub const ALL: [Exit; 8] = [
        Exit::Failure,
        Exit::Usage,
        Exit::Held,
        Exit::Lost,
        Exit::Invalid,
        Exit::Unavailable,
        Exit::Storage,
        Exit::Unverified,
    ];

    pub const fn code(self) -> u8 {
        match self {
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Held => 3,
            Exit::Lost => 4,
            Exit::Invalid => 5,
            Exit::Unavailable => 6,
            Exit::Storage => 7,
            Exit::Unverified => 8,
        }
    }

    /// The name scripts see in `--json` error reports.
    pub const fn name(self) -> &'static str {
        match self {
            Exit::Failure => "failure",
            Exit::Usage => "usage",
            Exit::Held => "held",
            Exit::Lost => "lost",
            Exit::Invalid => "invalid",
            Exit::Unavailable => "unavailable",
            Exit::Storage => "storage",
            Exit::Unverified => "unverified",
        }
    }

    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Failure => "anything else, including a demo whose story did not go as the lease rules say",
            Exit::Usage => {
                "the command line is malformed (unknown command or option, missing or unparsable value)"
            }
            Exit::Held => "another holder's lease is unexpired (GOTRY_TENANT_LEASE_HELD)",
            Exit::Lost => {
                "the named owner and epoch do not hold the lease, or it expired (GOTRY_TENANT_LEASE_LOST)"
            }
            Exit::Invalid => {
                "invalid input: an id, key, owner, epoch, store URL, organization key or folder is refused"
            }
            Exit::Unavailable => {
                "the lease store or the durable store is busy or cannot be reached; nothing was \
                 decided, retry later (GOTRY_TENANT_LEASE_STORE_UNAVAILABLE, \
                 GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE with the backend's code)"
            }
            Exit::Storage => {
                "the store's file is missing, cannot be opened, or is not a lease store; the report \
                 carries the storage engine's code (SQLITE_NOTADB, SQLITE_CANTOPEN, ENOENT, ...)"
            }
            Exit::Unverified => {
                "copies exist but none that was asked for verifies; the report lists each with its \
                 reason (GOTRY_TENANT_RESTORE_INVALID, ERR_COPY_INVALID)"
            }
        }
    }
}

/// The exit status section of `--help`, generated from [`Exit::ALL`] so that it cannot drift.
pub fn exit_status_help() -> String {
    let mut text = String::from("Exit status:\n  0  success\n");
    for exit in Exit::ALL {
        text.push_str(&format!(
            "  {}  {}: {}\n",
            exit.code(),
            exit.name(),
            exit.meaning()
        ));
    }
    text
}

/// A failed command: what went wrong, what to do, and the status to exit with.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    /// A `GOTRY_TENANT_*` code, the core's code for other kinds, or a file-system code.
    pub code: String,
    pub message: String,
    pub hint: String,
    /// Fields of the error that a script acts on, added to the JSON report: the holder's
    /// `record` of a LEASE_HELD refusal (who to forward to), the `skipped` copies of a
    /// RESTORE_INVALID (what to repair), the durable store's `backendCode` (why it failed).
    pub details: Map<String, Value>,
}

impl Failure {
    pub fn new(
        exit: Exit,
        code: impl Into<String>,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Failure {
        Failure {
            exit,
            code: code.into(),
            message: message.into(),
            hint: hint.into(),
            details: Map::new(),
        }
    }

    /// Copies that were passed over, each with its reason, in the JSON report as `skipped`.
    pub fn skipped(self, skipped: &[SkippedCopy]) -> Failure {
        let skipped = skipped.iter().map(render::skipped_json).collect();
        self.detail("skipped", Value::Array(skipped))
    }

    fn detail(mut self, field: &str, value: Value) -> Failure {
        self.details.insert(field.to_owned(), value);
        self
    }

    /// A failure of the file system, named by its `errno` name as the core names it
    /// ([`gotry_tenant_state::errors::errno_name`]).
    pub fn io(exit: Exit, error: &io::Error, message: String, hint: impl Into<String>) -> Failure {
        let code = gotry_tenant_state::errors::errno_name(error);
        Failure::new(exit, code, format!("{message}: {error}"), hint)
    }

    /// Replaces the default advice with advice that knows what the command was doing.
    pub fn hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = hint.into();
        self
    }

    /// Says what the command was doing when the failure happened.
    pub fn context(mut self, doing: impl std::fmt::Display) -> Failure {
        self.message = format!("{doing}: {}", self.message);
        self
    }

    /// The report on stderr for people: one line, what went wrong and what to do, with every
    /// credential masked (escaped first, so that a control character cannot split one).
    pub fn line(&self) -> String {
        let line = format!("gotry-tenant: {} [{}]; {}", self.message, self.code, self.hint);
        secrets::mask(&render::printable(&line)).into_owned()
    }

    /// The report on stderr for scripts: one line of JSON, every string in it masked as the
    /// line is.
    pub fn json(&self) -> Value {
        let mut error = json!({
            "exit": self.exit.code(),
            "kind": self.exit.name(),
            "code": self.code,
            "message": self.message,
            "hint": self.hint,
        });
        if let Value::Object(fields) = &mut error {
            fields.extend(self.details.clone());
        }
        secrets::mask_json(&mut error);
        json!({ "error": error })
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        let code = error.code_str().to_owned();
        let (exit, hint) = match &error {
            Error::LeaseHeld { .. } => (
                Exit::Held,
                "wait until the lease expires or have its holder release it",
            ),
            Error::LeaseLost { .. } | Error::Fenced { .. } => (
                Exit::Lost,
                "see the current owner and epoch with `gotry-tenant lease read KEY`",
            ),
            Error::LeaseStoreUnavailable { .. } => (
                Exit::Unavailable,
                "retry later; check that the store is reachable and that no process keeps it locked",
            ),
            Error::IdInvalid { .. } => (Exit::Invalid, "see the id formats in `gotry-tenant id --help`"),
            Error::InvalidArgument { .. } => {
                (Exit::Invalid, "see the accepted values in the command's --help")
            }
            Error::Storage { .. } => (
                Exit::Storage,
                "check that --store names a lease store that this user can read and write",
            ),
            Error::DurableStoreUnavailable { .. } => (
                Exit::Unavailable,
                "retry later; check that --durable names a store that is reachable and that this user can use",
            ),
            Error::RestoreInvalid { .. } => (
                Exit::Unverified,
                "no copy can be restored as it is; see each copy's verdict with `gotry-tenant copies verify KEY`",
            ),
            _ => (
                Exit::Failure,
                "this command did not expect that failure; please report it",
            ),
        };
        let message = match &error {
            // The code is reported beside the message already.
            Error::Storage { message, .. } => message.clone(),
            // The backend's code says what a retry is up against (EROFS will not go away).
            Error::DurableStoreUnavailable {
                message,
                backend_code,
            } => format!("{message} ({backend_code})"),
            other => other.to_string(),
        };
        let failure = Failure::new(exit, code, message, hint);
        match error {
            Error::LeaseHeld { record } => failure.detail("record", render::record_json(&record)),
            Error::DurableStoreUnavailable { backend_code, .. } => {
                failure.detail("backendCode", backend_code.into())
            }
            Error::RestoreInvalid { skipped, .. } => failure.skipped(&skipped),
            _ => failure,
        }
    }
}

#[cfg(test)]
mod tests {
    use gotry_tenant_state::{CopyId, LeaseRecord, SkipReason};

    use super::*;

    #[test]
    fn statuses_are_distinct_and_listed_in_help() {
        let help = exit_status_help();
        let mut seen = std::collections::HashSet::new();
        for exit in Exit::ALL {
            assert!(seen.insert(exit.code()), "status {} used twice", exit.code());
            assert!(exit.code() != 0);
            assert!(
                help.contains(&format!("  {}  {}: ", exit.code(), exit.name())),
                "{help}"
            );
        }
    }

    /// Every code a report can carry is in the README's list: the tool's own (each literal
    /// code given to `Failure::new` anywhere in the source), the file-system names, and the
    /// core's codes that reach a report as they are.
    #[test]
    fn every_code_the_tool_prints_is_in_the_readme() {
        let readme = include_str!("../README.md");
        let codes_section = &readme[readme.find("The code is one of").expect("the README lists codes")..];
        let mut codes: Vec<String> = gotry_tenant_state::errors::ERRNO_NAMES
            .iter()
            .map(|code| (*code).to_owned())
            .collect();
        codes.push("EIO".to_owned());
        codes.extend(gotry_tenant_state::ErrorCode::ALL.map(|code| code.as_str().to_owned()));
        codes.push(
            Error::InvalidArgument {
                message: String::new(),
            }
            .code_str()
            .to_owned(),
        );
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut literal_sites = 0;
        for entry in std::fs::read_dir(src).unwrap() {
            let source = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            // Spelt in two so that this test's own text does not match.
            let call = ["Failure", "::new("].concat();
            for (at, _) in source.match_indices(&call) {
                // The second argument, when it is a literal: the exit, a comma, "CODE".
                let args = &source[at + call.len()..];
                let after_exit = args[args.find(',').unwrap() + 1..].trim_start();
                if let Some(literal) = after_exit.strip_prefix('"') {
                    codes.push(literal[..literal.find('"').unwrap()].to_owned());
                    literal_sites += 1;
                }
            }
        }
        assert!(
            literal_sites >= 10,
            "the scan found only {literal_sites} literal codes"
        );
        for code in &codes {
            assert!(
                codes_section.contains(&format!("`{code}`")),
                "README's list of codes lacks `{code}`"
            );
        }
    }

    #[test]
    fn file_system_failures_are_named() {
        let named =
            |raw: i32| Failure::io(Exit::Invalid, &io::Error::from_raw_os_error(raw), "x".into(), "y").code;
        // Linux numbers; the names come from the portable kinds.
        if cfg!(target_os = "linux") {
            assert_eq!(named(21), "EISDIR");
            assert_eq!(named(20), "ENOTDIR");
            assert_eq!(named(2), "ENOENT");
            assert_eq!(named(13), "EACCES");
            assert_eq!(named(30), "EROFS");
            assert_eq!(named(28), "ENOSPC");
            assert_eq!(named(36), "ENAMETOOLONG");
            assert_eq!(named(5), "EIO");
        }
    }

    #[test]
    fn core_errors_map_to_their_status() {
        let record = LeaseRecord {
            key: "acme/k".into(),
            owner: "replica-a".into(),
            epoch: 4,
            lease_until_ms: 10,
            forgotten_at_epoch: 0,
        };
        let held = Failure::from(Error::LeaseHeld {
            record: record.clone(),
        });
        assert_eq!(held.exit, Exit::Held);
        assert_eq!(held.code, "GOTRY_TENANT_LEASE_HELD");
        assert_eq!(held.json()["error"]["record"]["owner"], "replica-a");
        let cases = [
            (Error::LeaseLost { message: "x".into() }, Exit::Lost),
            (
                Error::LeaseStoreUnavailable { message: "x".into() },
                Exit::Unavailable,
            ),
            (Error::IdInvalid { message: "x".into() }, Exit::Invalid),
            (Error::InvalidArgument { message: "x".into() }, Exit::Invalid),
            (
                Error::Storage {
                    code: "SQLITE_NOTADB".into(),
                    message: "file is not a database".into(),
                },
                Exit::Storage,
            ),
            (Error::CopyConflict { message: "x".into() }, Exit::Failure),
            (Error::RouterClosed, Exit::Failure),
        ];
        for (error, exit) in cases {
            let code = error.code_str().to_owned();
            let failure = Failure::from(error);
            assert_eq!(failure.exit, exit, "{code}");
            assert_eq!(failure.code, code);
            assert!(failure.details.is_empty());
        }
    }

    #[test]
    fn copy_errors_carry_what_a_script_needs() {
        let unavailable = Failure::from(Error::DurableStoreUnavailable {
            message: "copies/x cannot be written: read-only file system".into(),
            backend_code: "EROFS".into(),
        });
        assert_eq!(unavailable.exit, Exit::Unavailable);
        assert_eq!(unavailable.code, "GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE");
        assert!(unavailable
            .line()
            .contains("read-only file system (EROFS) [GOTRY_TENANT_DURABLE"));
        assert_eq!(unavailable.json()["error"]["backendCode"], "EROFS");

        let skipped = vec![
            SkippedCopy {
                id: CopyId { epoch: 2, seq: 1 },
                reason: SkipReason::Checksum,
            },
            SkippedCopy {
                id: CopyId { epoch: 1, seq: 4 },
                reason: SkipReason::Tenant,
            },
        ];
        let invalid = Failure::from(Error::RestoreInvalid {
            message: "none can be trusted".into(),
            skipped,
        });
        assert_eq!((invalid.exit, invalid.exit.code()), (Exit::Unverified, 8));
        assert_eq!(invalid.code, "GOTRY_TENANT_RESTORE_INVALID");
        assert_eq!(
            invalid.json()["error"]["skipped"],
            json!([
                { "epoch": 2, "seq": 1, "reason": "checksum" },
                { "epoch": 1, "seq": 4, "reason": "tenant" },
            ])
        );
    }

    #[test]
    fn the_human_report_is_one_line_even_for_hostile_text() {
        let failure = Failure::new(
            Exit::Lost,
            "GOTRY_TENANT_LEASE_LOST",
            "key a\nb\u{1b}[31m",
            "do x",
        );
        let line = failure.line();
        assert!(!line.contains('\n') && !line.contains('\u{1b}'), "{line}");
        assert!(line.contains("a\\nb\\u{1b}[31m"), "{line}");
        assert!(line.ends_with("[GOTRY_TENANT_LEASE_LOST]; do x"), "{line}");
    }
}
