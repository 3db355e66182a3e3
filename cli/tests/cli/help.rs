//! Help, exit statuses as documented, and shell completions.

use crate::Sandbox;

/// Every command path, checked against the `Commands:` sections of the help itself below.
const COMMANDS: [&str; 20] = [
    "demo",
    "lease",
    "lease read",
    "lease history",
    "lease list",
    "lease release",
    "lease forget",
    "lease compact",
    "copies",
    "copies list",
    "copies verify",
    "copies restore",
    "router",
    "router status",
    "id",
    "id derive",
    "id cache-partition",
    "id lease-key",
    "id root",
    "completions",
];

/// The commands that a help text lists under `Commands:`, without clap's `help`.
fn listed_commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

fn help(sandbox: &Sandbox, path: &str) -> String {
    let mut args: Vec<&str> = path.split_whitespace().collect();
    args.push("--help");
    sandbox.run(args).ok().to_owned()
}

#[test]
fn every_command_has_help_with_an_example_of_itself() {
    let sandbox = Sandbox::new();
    let mut found: Vec<String> = listed_commands(&help(&sandbox, ""));
    for group in ["lease", "copies", "router", "id"] {
        found.extend(
            listed_commands(&help(&sandbox, group))
                .into_iter()
                .map(|c| format!("{group} {c}")),
        );
    }
    found.sort();
    let mut expected: Vec<String> = COMMANDS.iter().map(|c| (*c).to_owned()).collect();
    expected.sort();
    assert_eq!(
        found, expected,
        "the help lists other commands than this test covers"
    );
    for path in COMMANDS {
        let text = help(&sandbox, path);
        assert!(text.contains("Example"), "{path}: {text}");
        assert!(
            text.contains(&format!("  gotry-tenant {path}")),
            "{path}'s example does not run it: {text}"
        );
    }
}

/// The exit statuses that `--help` documents: (status, name).
fn documented_statuses(sandbox: &Sandbox) -> Vec<(u8, String)> {
    help(sandbox, "")
        .lines()
        .skip_while(|line| *line != "Exit status:")
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .map(|line| {
            let mut words = line.split_whitespace();
            let status = words.next().unwrap().parse().unwrap();
            let name = words.next().unwrap().trim_end_matches(':').to_owned();
            (status, name)
        })
        .collect()
}

#[test]
fn exit_statuses_are_distinct_and_documented_in_help_and_readme() {
    let sandbox = Sandbox::new();
    let statuses = documented_statuses(&sandbox);
    let names: Vec<&str> = statuses.iter().map(|(_, name)| name.as_str()).collect();
    assert_eq!(
        names,
        [
            "success",
            "failure",
            "usage",
            "held",
            "lost",
            "invalid",
            "unavailable",
            "storage",
            "unverified"
        ]
    );
    let codes: Vec<u8> = statuses.iter().map(|(code, _)| *code).collect();
    assert_eq!(codes, [0, 1, 2, 3, 4, 5, 6, 7, 8]);
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for (code, name) in &statuses {
        assert!(
            readme.contains(&format!("| {code} | {name} |")),
            "README lacks status {code} {name}"
        );
    }
}

#[test]
fn help_and_version_go_to_stdout_and_succeed() {
    let sandbox = Sandbox::new();
    let version = sandbox.run(["--version"]);
    assert_eq!(
        version.ok(),
        format!("gotry-tenant {}\n", env!("CARGO_PKG_VERSION"))
    );
    let top = help(&sandbox, "");
    assert!(top.contains("GOTRY_ORGANIZATION_KEY_FILE"), "{top}");
    assert!(top.contains("never taken from an argument"), "{top}");
}

#[test]
fn usage_errors_are_one_line_with_a_hint() {
    let sandbox = Sandbox::new();
    let line = sandbox.run(["lease", "relase"]).failed(2, "USAGE").to_owned();
    assert!(line.contains("'release'"), "the tip survives: {line}");
    let line = sandbox.run(["lease"]).failed(2, "USAGE").to_owned();
    assert!(line.contains("read, history, list, release, forget"), "{line}");
    sandbox.run(["id", "lease-key", "acme"]).failed(2, "USAGE");
    sandbox.run(Vec::<&str>::new()).failed(2, "USAGE");
    let error = sandbox.run(["lease", "read", "--json"]).failed_json(2, "USAGE");
    assert!(error["message"].as_str().unwrap().contains("<KEY>"), "{error}");
}

#[test]
fn completions_cover_every_command() {
    let sandbox = Sandbox::new();
    for shell in ["bash", "zsh", "fish"] {
        let script = sandbox.run(["completions", shell]);
        let script = script.ok();
        assert!(script.contains("gotry-tenant"), "{shell}");
        // Fish names options without their dashes.
        for word in [
            "demo",
            "release",
            "forget",
            "compact",
            "cache-partition",
            "lease-key",
            "copies",
            "durable",
            "store",
            "key-file",
        ] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    // A completion script has no JSON form: it is printed as it is.
    let bash = sandbox.run(["completions", "bash"]);
    assert_eq!(sandbox.run(["completions", "bash", "--json"]).ok(), bash.ok());
    sandbox.run(["completions", "tcsh"]).failed(2, "USAGE");
}
