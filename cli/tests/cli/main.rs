//! The built `gotry-tenant` binary, run over every command in a folder of its own.

mod copies;
mod demo;
mod help;
mod id;
mod lease;
mod router;
mod secrets;
mod store;

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_gotry-tenant");

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {:?} / stderr {:?}",
                self.stdout, self.stderr
            )
        })
    }

    /// Asserts success and returns stdout.
    pub fn ok(&self) -> &str {
        assert_eq!(self.status, 0, "expected success: {self:?}");
        assert!(self.stderr.is_empty(), "{self:?}");
        &self.stdout
    }

    /// Asserts a failure with `status` reported on exactly one stderr line that names `code`,
    /// and returns that line.
    pub fn failed(&self, status: i32, code: &str) -> &str {
        assert_eq!(self.status, status, "{self:?}");
        assert!(self.stdout.is_empty(), "a failure printed to stdout: {self:?}");
        let line = self.stderr.strip_suffix('\n').unwrap_or(&self.stderr);
        assert!(
            !line.contains('\n'),
            "the report is not one line: {:?}",
            self.stderr
        );
        assert!(line.starts_with("gotry-tenant: "), "{line}");
        assert!(
            line.contains(&format!("[{code}]; ")),
            "expected [{code}] and a hint: {line}"
        );
        line
    }

    /// Asserts a failure reported as one line of JSON on stderr, and returns its error object.
    pub fn failed_json(&self, status: i32, code: &str) -> Value {
        assert_eq!(self.status, status, "{self:?}");
        assert!(self.stdout.is_empty(), "{self:?}");
        assert_eq!(self.stderr.trim_end().lines().count(), 1, "{self:?}");
        let report: Value = serde_json::from_str(&self.stderr).expect("stderr is JSON");
        let error = report["error"].clone();
        assert_eq!(error["exit"], status, "{error}");
        assert_eq!(error["code"], code, "{error}");
        assert!(!error["hint"].as_str().unwrap().is_empty(), "{error}");
        error
    }
}

/// A folder to run in, with no organization key in the environment unless a test sets one.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Default for Sandbox {
    fn default() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox::default()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .current_dir(self.dir.path())
            .env_remove("GOTRY_ORGANIZATION_KEY")
            .env_remove("GOTRY_ORGANIZATION_KEY_FILE");
        command
    }

    pub fn run<I, S>(&self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        run(self.command(args))
    }
}

/// The string `field` of each object of the JSON array `list`; a missing one fails with the
/// object, which shows what the binary printed instead.
pub fn strings<'a>(list: &'a Value, field: &str) -> Vec<&'a str> {
    items(list)
        .map(|item| {
            item[field]
                .as_str()
                .unwrap_or_else(|| panic!("no string {field} in {item}"))
        })
        .collect()
}

/// As [`strings`], for an integer `field`.
pub fn numbers(list: &Value, field: &str) -> Vec<i64> {
    items(list)
        .map(|item| {
            item[field]
                .as_i64()
                .unwrap_or_else(|| panic!("no integer {field} in {item}"))
        })
        .collect()
}

fn items(list: &Value) -> std::slice::Iter<'_, Value> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
}

pub fn run(mut command: Command) -> Run {
    let output = command.output().expect("the binary runs");
    Run {
        status: output.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}
