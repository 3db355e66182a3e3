//! `gotry-tenant`: the operators' command-line tool for tenant leases, durable copies and ids,
//! and a newcomer's first run (`gotry-tenant demo`).
//!
//! Every rule is the core's; this binary parses, calls, and prints. Output is text for people
//! or, with `--json`, JSON for scripts; failures are one line on stderr and an exit status
//! per kind of outcome (see `--help`).

mod cli;
mod copies;
mod demo;
mod durable;
mod failure;
mod id;
mod key;
mod lease;
mod render;
mod router;
mod store;

use std::ffi::OsStr;
use std::io::{self, Write};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use gotry_tenant_state::secrets;
use serde_json::{json, Value};

use crate::cli::{Cli, Command};
use crate::failure::{Exit, Failure};

/// What a command produced: JSON for `--json`, text otherwise. A completion script has no
/// JSON form and is printed as it is either way.
pub struct Report {
    json: Option<Value>,
    text: String,
}

impl Report {
    pub fn new(json: Value, text: String) -> Report {
        Report {
            json: Some(json),
            text,
        }
    }

    /// A single value: bare on its own line for `$(...)`, `{field: value}` in JSON.
    pub fn value(field: &str, value: String) -> Report {
        let text = format!("{value}\n");
        Report::new(json!({ field: value }), text)
    }
}

/// A free-text argument as UTF-8: refused, never altered, when it is not.
pub fn text_arg<'a>(name: &str, value: &'a OsStr) -> Result<&'a str, Failure> {
    value.to_str().ok_or_else(|| {
        Failure::new(
            Exit::Invalid,
            "ERR_INVALID_UTF8",
            format!("the {name} is not valid UTF-8"),
            "pass it as UTF-8 text",
        )
    })
}

fn main() -> ExitCode {
    // Known before parsing, so that even a usage error is reported as JSON to a script.
    let json = std::env::args_os().skip(1).any(|arg| arg == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage(&error, json),
    };
    let outcome = match &cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Lease(command) => lease::run(command),
        Command::Copies(command) => copies::run(command),
        Command::Router(command) => router::run(command),
        Command::Id(command) => id::run(command),
        Command::Completions { shell } => Ok(completions(*shell)),
    };
    match outcome {
        Ok(report) => print(report, cli.json),
        Err(failure) => fail(&failure, cli.json),
    }
}

fn completions(shell: clap_complete::Shell) -> Report {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "gotry-tenant", &mut script);
    Report {
        json: None,
        // Every name in the script is a Rust string, so the bytes are UTF-8 and the
        // conversion never replaces anything.
        text: String::from_utf8_lossy(&script).into_owned(),
    }
}

fn print(report: Report, json: bool) -> ExitCode {
    // Every report is masked as failures are: a key, a folder or a store named on the
    // command line may be a store URL with its password in it, put in the wrong place. A
    // completion script (the one report without JSON) is code for the shell, and holds no
    // argument.
    let text = match (json, report.json) {
        (true, Some(mut value)) => {
            secrets::mask_json(&mut value);
            format!("{value:#}\n")
        }
        (false, Some(_)) => secrets::mask(&report.text).into_owned(),
        (_, None) => report.text,
    };
    let mut stdout = io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stopped early (`| head`) got what it wanted.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(error) => fail(
            &Failure::io(
                Exit::Failure,
                &error,
                "cannot write the output".to_owned(),
                "check where stdout goes",
            ),
            json,
        ),
    }
}

fn fail(failure: &Failure, json: bool) -> ExitCode {
    let line = if json {
        failure.json().to_string()
    } else {
        failure.line()
    };
    // Nothing is left to report to if stderr is gone; the status still says it.
    let _ = writeln!(io::stderr().lock(), "{line}");
    ExitCode::from(failure.exit.code())
}

/// clap's own report of a malformed command line, folded into the one-line form. Help and
/// version requests are printed as clap prints them.
fn usage(error: &clap::Error, json: bool) -> ExitCode {
    if matches!(error.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        return match error.print() {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::from(Exit::Failure.code()),
        };
    }
    let rendered = error.render().to_string();
    let lines: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("For more information"))
        .collect();
    // What went wrong comes first (sometimes over several lines); tips and usage follow.
    let advice = lines
        .iter()
        .position(|line| line.starts_with("tip:") || line.starts_with('[') || line.starts_with("Usage:"))
        .unwrap_or(lines.len());
    let what = lines[..advice].join(" ");
    let what = what.strip_prefix("error: ").unwrap_or(&what);
    let mut hint = lines[advice..].join("; ");
    if !hint.is_empty() {
        hint.push_str("; ");
    }
    hint.push_str("see --help");
    fail(&Failure::new(Exit::Usage, "USAGE", what, hint), json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Every command, at every depth, shows an example of itself in its help.
    #[test]
    fn every_command_has_an_example() {
        fn visit(command: &clap::Command, path: &str, checked: &mut usize) {
            let path = if path.is_empty() {
                command.get_name().to_owned()
            } else {
                format!("{path} {}", command.get_name())
            };
            let help = command
                .get_after_help()
                .map(|h| h.to_string())
                .unwrap_or_default();
            assert!(help.contains("Example"), "{path} has no example");
            assert!(
                help.contains(&format!("  {path}")),
                "{path}'s example does not run it"
            );
            *checked += 1;
            for sub in command.get_subcommands() {
                visit(sub, &path, checked);
            }
        }
        let mut checked = 0;
        visit(&Cli::command(), "", &mut checked);
        // The root, demo, lease and its 6, copies and its 3, router and its 1, id and its 4,
        // completions.
        assert_eq!(checked, 21);
    }

    #[test]
    fn utf8_arguments_are_refused_not_altered() {
        assert_eq!(text_arg("key", OsStr::new("acme/é")).unwrap(), "acme/é");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let failure = text_arg("key", OsStr::from_bytes(b"acme/\xff")).unwrap_err();
            assert_eq!(failure.exit, Exit::Invalid);
            assert!(failure.message.contains("the key"));
        }
    }
}
