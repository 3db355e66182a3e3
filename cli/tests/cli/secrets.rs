//! A store URL with a password in it, well formed or almost (a leading space, `mysql//`,
//! `mysql:/`), given to every command that takes one, or put where it does not belong: the
//! password never shows on stdout or stderr, text or JSON, and the report still names the
//! scheme and the host.

use gotry_tenant_state::{DirectoryDurableStore, SqliteLeaseStore};

use crate::{Run, Sandbox};

const PASSWORD: &str = "Pa55w0rd-must-not-leak";
const KEY_ID: &str = "AKIAEXAMPLEKEYID";
const SECRET: &str = "wJalrXUtnFEMI-secret-must-not-leak";
const KEY: &str = "acme/t-0123456789abcdef0123456789abcdef";

/// `--store` values: (value, host it names, exit status, code).
fn lease_stores() -> Vec<(String, &'static str, i32, &'static str)> {
    vec![
        // Well formed, unreachable: the core's report names the host.
        (
            format!("mysql://root:{PASSWORD}@127.0.0.1:1/leases?timeout_ms=500"),
            "127.0.0.1",
            6,
            "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE",
        ),
        // A leading space: not a URL, so a path that does not exist.
        (
            format!(" mysql://root:{PASSWORD}@db.example:3306/leases"),
            "db.example",
            7,
            "ENOENT",
        ),
        (
            format!("mysql//root:{PASSWORD}@db.example:3306/leases"),
            "db.example",
            7,
            "ENOENT",
        ),
        // A URL the core refuses.
        (
            format!("mysql:/root:{PASSWORD}@db.example:3306/leases"),
            "db.example",
            5,
            "ERR_OUT_OF_RANGE",
        ),
        (
            format!("sqlite://root:{PASSWORD}@db.example/leases.db"),
            "db.example",
            5,
            "ERR_OUT_OF_RANGE",
        ),
    ]
}

/// `--durable` values, as `lease_stores`.
fn durable_stores() -> Vec<(String, &'static str, i32, &'static str)> {
    vec![
        (
            format!(" s3://{KEY_ID}:{SECRET}@copies-bucket/prod"),
            "copies-bucket",
            7,
            "ENOENT",
        ),
        (
            format!("s3//{KEY_ID}:{SECRET}@copies-bucket/prod"),
            "copies-bucket",
            7,
            "ENOENT",
        ),
        (
            format!("s3:/{KEY_ID}:{SECRET}@copies-bucket/prod"),
            "copies-bucket",
            5,
            "ERR_OUT_OF_RANGE",
        ),
    ]
}

/// Nothing the run printed holds a secret.
fn assert_masked(run: &Run, what: &str) {
    for secret in [PASSWORD, KEY_ID, SECRET] {
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "{what}: {secret} leaked: {run:?}"
        );
    }
}

/// `args` as they are, and with `--json`: each output has its own way to leak.
fn text_and_json<'a>(args: &[&'a str]) -> [Vec<&'a str>; 2] {
    [args.to_vec(), [args, &["--json"]].concat()]
}

/// The failure, in text and in JSON, is masked but still names the scheme and the host.
fn check(sandbox: &Sandbox, args: &[&str], value: &str, host: &str, status: i32, code: &str) {
    let what = format!("{args:?} with {value:?}");
    let [text_args, json_args] = text_and_json(args);
    let text = sandbox.run(&text_args);
    assert_masked(&text, &what);
    let line = text.failed(status, code);
    let scheme = value.trim_start().split([':', '/']).next().unwrap();
    assert!(line.contains(host), "{what}: the host is gone: {line}");
    assert!(line.contains(scheme), "{what}: the scheme is gone: {line}");
    assert!(line.contains("***@"), "{what}: {line}");

    let json = sandbox.run(&json_args);
    assert_masked(&json, &what);
    let error = json.failed_json(status, code);
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(host), "{what}: {message}");
}

#[test]
fn a_lease_store_password_never_shows() {
    let sandbox = Sandbox::new();
    drop(DirectoryDurableStore::open(sandbox.path("gotry-copies")).unwrap());
    let commands: [&[&str]; 5] = [
        &["lease", "list"],
        &["lease", "read", KEY],
        &["lease", "release", KEY, "--owner", "replica-a", "--epoch", "1"],
        &["router", "status"],
        &["copies", "restore", KEY, "--to", "look"],
    ];
    for (value, host, status, code) in lease_stores() {
        for command in commands {
            let args = [command, &["--store", &value]].concat();
            check(&sandbox, &args, &value, host, status, code);
        }
    }
}

#[test]
fn a_durable_store_secret_never_shows() {
    let sandbox = Sandbox::new();
    drop(SqliteLeaseStore::open(sandbox.path("gotry-leases.db")).unwrap());
    let commands: [&[&str]; 3] = [
        &["copies", "list", KEY],
        &["copies", "verify", KEY],
        &["router", "status"],
    ];
    for (value, host, status, code) in durable_stores() {
        for command in commands {
            let args = [command, &["--durable", &value]].concat();
            check(&sandbox, &args, &value, host, status, code);
        }
    }
    // A file: URL with a credential in it is an S3 URL with the wrong scheme: the core
    // refuses it rather than create a folder named after the secret, and the report names it
    // with the credential masked.
    let url = format!("file:{KEY_ID}:{SECRET}@copies-bucket/prod");
    check(
        &sandbox,
        &["copies", "list", KEY, "--durable", url.as_str()],
        &url,
        "copies-bucket/prod",
        5,
        "ERR_OUT_OF_RANGE",
    );
    assert!(!sandbox.path(&format!("{KEY_ID}:{SECRET}@copies-bucket")).exists());
}

/// The demo opens (and creates) the store it is given, and names it in its timeline.
#[test]
fn the_demo_never_shows_a_store_password() {
    let sandbox = Sandbox::new();
    for (value, _, _, _) in lease_stores() {
        for args in text_and_json(&["demo", "--store", &value]) {
            assert_masked(&sandbox.run(&args), &value);
        }
    }
}

/// A URL where a key, an owner, an organization or nothing belongs: clap's report and the
/// command's own output quote it, masked.
#[test]
fn a_password_in_the_wrong_place_never_shows() {
    let sandbox = Sandbox::new();
    drop(SqliteLeaseStore::open(sandbox.path("gotry-leases.db")).unwrap());
    drop(DirectoryDurableStore::open(sandbox.path("gotry-copies")).unwrap());
    let url = format!("mysql://root:{PASSWORD}@db.example:3306/leases");
    let url = url.as_str();
    // A positional argument no command takes: a usage error.
    check(&sandbox, &["lease", "list", url], url, "db.example", 2, "USAGE");
    check(
        &sandbox,
        &["router", "status", url],
        url,
        "db.example",
        2,
        "USAGE",
    );
    // A lease key the store refuses, or does not know.
    check(
        &sandbox,
        &["lease", "release", url, "--owner", "o", "--epoch", "1"],
        url,
        "db.example",
        4,
        "GOTRY_TENANT_LEASE_LOST",
    );
    for args in text_and_json(&["lease", "read", url]) {
        let run = sandbox.run(&args);
        assert_masked(&run, url);
        run.ok();
    }
    for args in text_and_json(&["copies", "list", url]) {
        assert_masked(&sandbox.run(&args), url);
    }
    let read = sandbox.run(["lease", "read", url]);
    assert_eq!(
        read.ok(),
        "no lease recorded for mysql://***@db.example:3306/leases\n"
    );
}
