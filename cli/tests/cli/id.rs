//! `id derive|cache-partition|lease-key|root` and where the organization key comes from.

use std::path::Path;

use crate::Sandbox;

/// The core's independent vector: HMAC-SHA256 with this key, computed with Python's hmac.
const KEY: &[u8; 32] = b"0123456789abcdef0123456789abcdef";
const TENANT: &str = "t-20464cc2afc52b55ccbd6928130a63fd";
const PARTITION: &str = "pc-60e2110c6da3c630ee5bdcbb56ee01f3";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A sandbox with the vector's key in `org.key`, as hex text with a trailing newline.
fn with_key_file() -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path("org.key"), format!("{}\n", hex(KEY))).unwrap();
    sandbox
}

const DERIVE: [&str; 6] = [
    "id",
    "derive",
    "--issuer",
    "https://idp.example",
    "--subject",
    "user-1",
];

#[test]
fn derive_matches_the_independent_vector_from_every_key_source() {
    let sandbox = with_key_file();
    let mut args = DERIVE.to_vec();
    args.extend(["--key-file", "org.key"]);
    assert_eq!(sandbox.run(&args).ok(), format!("{TENANT}\n"));
    args.push("--json");
    assert_eq!(sandbox.run(&args).json()["ledgerTenantId"], TENANT);

    let mut from_path = sandbox.command(DERIVE);
    from_path.env("GOTRY_ORGANIZATION_KEY_FILE", sandbox.path("org.key"));
    assert_eq!(crate::run(from_path).ok(), format!("{TENANT}\n"));

    let mut from_hex = sandbox.command(DERIVE);
    from_hex.env("GOTRY_ORGANIZATION_KEY", hex(KEY).to_uppercase());
    assert_eq!(crate::run(from_hex).ok(), format!("{TENANT}\n"));

    // --key-file wins over the environment.
    let mut both = sandbox.command(DERIVE.iter().chain(&["--key-file", "org.key"]));
    both.env("GOTRY_ORGANIZATION_KEY", "ab".repeat(40));
    assert_eq!(crate::run(both).ok(), format!("{TENANT}\n"));
}

#[test]
fn claims_are_taken_byte_for_byte_and_checked_by_the_core() {
    let sandbox = with_key_file();
    let derive = |issuer: &str, subject: &str| {
        sandbox.run([
            "id",
            "derive",
            "--key-file",
            "org.key",
            "--issuer",
            issuer,
            "--subject",
            subject,
        ])
    };
    let composed = derive("i", "\u{e9}");
    let decomposed = derive("i", "e\u{301}");
    assert_ne!(composed.ok(), decomposed.ok());
    let dash = derive("-i", "--s");
    assert!(dash.ok().starts_with("t-"), "a claim may start with a dash");
    assert_eq!(derive("i", &"s".repeat(512)).status, 0);
    // (A NUL cannot reach a program through argv; the core's other rules answer here.)
    for (issuer, subject) in [("", "s"), ("i", "")] {
        derive(issuer, subject).failed(5, "GOTRY_TENANT_ID_INVALID");
    }
    let long = derive("i", &"s".repeat(513));
    assert!(long.failed(5, "GOTRY_TENANT_ID_INVALID").contains("512"));
}

#[cfg(unix)]
#[test]
fn a_claim_that_is_not_utf8_is_refused_not_replaced() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let sandbox = with_key_file();
    let subject = OsStr::from_bytes(b"user-\xff");
    let run = sandbox.run([
        OsStr::new("id"),
        OsStr::new("derive"),
        OsStr::new("--key-file"),
        OsStr::new("org.key"),
        OsStr::new("--issuer"),
        OsStr::new("i"),
        OsStr::new("--subject"),
        subject,
    ]);
    assert!(run
        .failed(5, "GOTRY_TENANT_ID_INVALID")
        .contains("subject must be well-formed UTF-8"));
}

#[test]
fn a_missing_or_short_or_malformed_key_is_refused() {
    let sandbox = with_key_file();
    let derive_with = |file: &str| {
        let mut args = DERIVE.to_vec();
        args.extend(["--key-file", file]);
        sandbox.run(args)
    };
    let missing = derive_with("absent.key");
    let line = missing.failed(5, "ENOENT");
    assert!(line.contains("cannot read the key file absent.key"), "{line}");
    assert!(line.contains("openssl rand -hex 32"), "{line}");

    std::fs::write(sandbox.path("short.key"), hex(&KEY[..31])).unwrap();
    let short = derive_with("short.key");
    let line = short.failed(5, "GOTRY_TENANT_ID_INVALID");
    assert!(line.contains("at least 32 bytes, got 31"), "{line}");
    assert!(line.contains("short.key"), "{line}");

    std::fs::write(sandbox.path("raw.key"), KEY).unwrap();
    let raw = derive_with("raw.key");
    // The raw key happens to be hex digits only: 32 digits are 16 bytes, too short.
    assert!(raw.failed(5, "GOTRY_TENANT_ID_INVALID").contains("got 16"));

    std::fs::write(sandbox.path("binary.key"), [0xffu8; 32]).unwrap();
    let binary = derive_with("binary.key");
    let line = binary.failed(5, "ERR_ORGANIZATION_KEY");
    assert!(line.contains("is not hex text (byte 0"), "{line}");

    std::fs::write(sandbox.path("empty.key"), "\n").unwrap();
    assert!(derive_with("empty.key")
        .failed(5, "ERR_ORGANIZATION_KEY")
        .contains("is empty"));

    let none = sandbox.run(DERIVE);
    let line = none.failed(5, "ERR_ORGANIZATION_KEY");
    assert!(
        line.contains("GOTRY_ORGANIZATION_KEY_FILE") && line.contains("--key-file"),
        "{line}"
    );

    let mut short_hex = sandbox.command(DERIVE);
    short_hex.env("GOTRY_ORGANIZATION_KEY", "00".repeat(16));
    crate::run(short_hex).failed(5, "GOTRY_TENANT_ID_INVALID");

    let mut two = sandbox.command(DERIVE);
    two.env("GOTRY_ORGANIZATION_KEY", hex(KEY));
    two.env("GOTRY_ORGANIZATION_KEY_FILE", sandbox.path("org.key"));
    assert!(crate::run(two).failed(5, "ERR_ORGANIZATION_KEY").contains("both"));

    let mut json = sandbox.command(["id", "derive", "--issuer", "i", "--subject", "s", "--json"]);
    json.arg("--key-file").arg(Path::new("short.key"));
    crate::run(json).failed_json(5, "GOTRY_TENANT_ID_INVALID");
}

#[test]
fn the_key_never_appears_in_a_report() {
    let sandbox = Sandbox::new();
    // 31 bytes of hex, refused as too short: the report must not echo them.
    let secret = "5ec2e7".repeat(10) + "5e";
    std::fs::write(sandbox.path("k"), &secret).unwrap();
    let run = sandbox.run(["id", "cache-partition", TENANT, "--key-file", "k"]);
    let line = run.failed(5, "GOTRY_TENANT_ID_INVALID");
    assert!(!line.contains("5ec2e7"), "{line}");
}

#[test]
fn cache_partition_matches_the_vector_and_checks_the_tenant_first() {
    let sandbox = with_key_file();
    let run = sandbox.run(["id", "cache-partition", TENANT, "--key-file", "org.key"]);
    assert_eq!(run.ok(), format!("{PARTITION}\n"));
    let json = sandbox.run(["id", "cache-partition", TENANT, "--key-file", "org.key", "--json"]);
    assert_eq!(json.json()["promptCachePartition"], PARTITION);
    // No key is needed to learn that the tenant id is wrong.
    for bad in ["t-nope", &format!("{TENANT}\n"), &TENANT.to_uppercase()] {
        let run = sandbox.run(["id", "cache-partition", bad]);
        assert!(run
            .failed(5, "GOTRY_TENANT_ID_INVALID")
            .contains("32 lowercase hex"));
    }
}

#[test]
fn lease_keys_are_built_from_valid_ids_only() {
    let sandbox = Sandbox::new();
    assert_eq!(
        sandbox.run(["id", "lease-key", "acme", TENANT]).ok(),
        format!("acme/{TENANT}\n")
    );
    let json = sandbox.run(["id", "lease-key", "acme", TENANT, "--json"]).json();
    assert_eq!(json["leaseKey"], format!("acme/{TENANT}"));
    for org in ["Acme", "acme\n", "-acme", "", "ac/me", &"a".repeat(64)] {
        let run = sandbox.run(["id", "lease-key", org, TENANT]);
        assert!(
            run.failed(5, "GOTRY_TENANT_ID_INVALID")
                .contains("organization id"),
            "{org:?}"
        );
    }
    let run = sandbox.run(["id", "lease-key", "acme", "t-123", "--json"]);
    let error = run.failed_json(5, "GOTRY_TENANT_ID_INVALID");
    assert_eq!(error["kind"], "invalid");
}

#[test]
fn tenant_roots_resolve_lexically() {
    let sandbox = Sandbox::new();
    let tail = format!("orgs/acme/tenants/{TENANT}");
    let absolute = sandbox.run(["id", "root", "/srv/state/../state2/./", "acme", TENANT]);
    assert_eq!(absolute.ok(), format!("/srv/state2/{tail}\n"));
    // A relative root is resolved against the working directory, which is the sandbox.
    let cwd = sandbox.dir.path().canonicalize().unwrap();
    let relative = sandbox
        .run(["id", "root", "state", "acme", TENANT, "--json"])
        .json();
    let root = relative["tenantRoot"].as_str().unwrap();
    assert_eq!(Path::new(root), cwd.join("state").join(&tail));
    let escape = sandbox.run(["id", "root", "/srv", "../etc", TENANT]);
    escape.failed(5, "GOTRY_TENANT_ID_INVALID");
}

/// Runs `command`, killing it if it has not finished within ten seconds, so that a read
/// without end fails the test instead of hanging it.
fn run_bounded(mut command: std::process::Command) -> crate::Run {
    use std::io::Read;
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(10) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the binary was still running after 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut stdout, mut stderr) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    crate::Run {
        status: status.code().unwrap(),
        stdout,
        stderr,
    }
}

#[test]
fn a_key_file_is_read_up_to_64_kib_and_no_further() {
    let sandbox = Sandbox::new();
    let derive_with = |path: &str| {
        let mut args = DERIVE.to_vec();
        args.extend(["--key-file", path]);
        run_bounded(sandbox.command(args))
    };
    // A device without end: refused at the cap, quickly, with the cap named.
    let zero = derive_with("/dev/zero");
    let line = zero.failed(5, "ERR_ORGANIZATION_KEY");
    assert!(line.contains("more than 65536 bytes (64 KiB)"), "{line}");
    let error = run_bounded(sandbox.command(DERIVE.iter().chain(&["--key-file", "/dev/zero", "--json"])))
        .failed_json(5, "ERR_ORGANIZATION_KEY");
    assert!(error["message"].as_str().unwrap().contains("65536"), "{error}");
    let mut from_var = sandbox.command(DERIVE);
    from_var.env("GOTRY_ORGANIZATION_KEY_FILE", "/dev/zero");
    let line = run_bounded(from_var);
    let line = line.failed(5, "ERR_ORGANIZATION_KEY");
    assert!(line.contains("(from GOTRY_ORGANIZATION_KEY_FILE)"), "{line}");

    // A key padded with whitespace to the cap exactly is read; one byte more is refused.
    let padded = format!("{}\n", hex(KEY));
    let at_cap = format!("{padded}{}", " ".repeat(65_536 - padded.len()));
    std::fs::write(sandbox.path("at-cap.key"), &at_cap).unwrap();
    assert_eq!(derive_with("at-cap.key").ok(), format!("{TENANT}\n"));
    std::fs::write(sandbox.path("over.key"), format!("{at_cap} ")).unwrap();
    let line = derive_with("over.key");
    let line = line.failed(5, "ERR_ORGANIZATION_KEY");
    assert!(!line.contains(&hex(KEY)), "the key is quoted: {line}");
}

#[test]
fn a_folder_as_key_file_is_named_a_folder() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path("keys")).unwrap();
    let mut args = DERIVE.to_vec();
    args.extend(["--key-file", "keys"]);
    let run = sandbox.run(&args);
    let line = run.failed(5, "EISDIR");
    assert!(line.contains("the key file keys is a folder"), "{line}");
    let mut from_var = sandbox.command(DERIVE);
    from_var.env("GOTRY_ORGANIZATION_KEY_FILE", sandbox.path("keys"));
    crate::run(from_var).failed(5, "EISDIR");
    let partition = sandbox.run(["id", "cache-partition", TENANT, "--key-file", "keys", "--json"]);
    partition.failed_json(5, "EISDIR");
}
