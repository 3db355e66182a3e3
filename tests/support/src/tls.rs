//! What the TLS tests of the MySQL and PostgreSQL stores share: each store runs against a
//! throwaway server of its own that takes only TLS (scripts/mariadb-tls.sh,
//! scripts/postgres-tls.sh), and is held to the same checks there, so that the two stores
//! cannot come to mean different things by a working or a refused TLS connection.

use std::time::Instant;

use gotry_tenant_state::{open_lease_store, Error, LeaseOp, LeaseStore};

use crate::mysql::{encode, fresh_prefix};

/// The variables that `scripts/<script>` prints for its server (its URL, the CA that signed
/// its certificate, an unrelated CA), named by `names` in that order; or a failure that says
/// how to start one, or that `skip_var` marks the tests of a `server` server ignored.
pub fn server_vars(names: [&str; 3], server: &str, script: &str, skip_var: &str) -> [String; 3] {
    let [url, ca, other_ca] = names;
    names.map(|name| match std::env::var(name) {
        Ok(value) if !value.is_empty() => value,
        _ => panic!(
            "this test needs a {server} server that takes only TLS connections, and {name} is \
             not set: start one with eval \"$(scripts/{script})\" (scripts/test.sh does), \
             which sets {url}, {ca} and {other_ca}; or build the tests with {skip_var}=1 to mark \
             the tests that need a {server} server ignored"
        ),
    })
}

/// The URL of a server's `user`, `password` and `database` at `host` and `port` instead of
/// its own, with tables no other test uses and `query`.
pub fn url_at(
    scheme: &str,
    user: Option<&str>,
    password: Option<&str>,
    host: &str,
    port: u16,
    database: &str,
    query: &str,
) -> String {
    let user = user.map(encode).unwrap_or_default();
    let password = password.map(|p| format!(":{}", encode(p))).unwrap_or_default();
    let at = if user.is_empty() && password.is_empty() {
        ""
    } else {
        "@"
    };
    let prefix = fresh_prefix();
    let query = if query.is_empty() {
        String::new()
    } else {
        format!("&{query}")
    };
    format!(
        "{scheme}://{user}{password}{at}{}/{}?prefix={prefix}{query}",
        host_port(host, port),
        encode(database)
    )
}

/// `host:port`, an IPv6 address in brackets.
pub fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A whole tenure over `store`: acquire, renew, release, and the log of it.
#[track_caller]
pub fn tenure(store: &dyn LeaseStore) {
    let grant = store.acquire("tls-k", "o", 60_000).unwrap();
    assert_eq!(grant.record.epoch, 1);
    let renewed = store.renew("tls-k", "o", 1, 60_000).unwrap();
    assert_eq!(renewed.record.epoch, 1);
    let released = store.release("tls-k", "o", 1).unwrap();
    assert_eq!(released.epoch, 1);
    assert_eq!(store.acquire("tls-k", "p", 60_000).unwrap().record.epoch, 2);
    let ops: Vec<LeaseOp> = store
        .history(Some("tls-k"))
        .unwrap()
        .iter()
        .map(|e| e.op)
        .collect();
    assert_eq!(
        ops,
        [
            LeaseOp::Acquire,
            LeaseOp::Renew,
            LeaseOp::Release,
            LeaseOp::Acquire
        ]
    );
}

/// Opening `url` fails with LEASE_STORE_UNAVAILABLE under `code`, naming `mode` (the URL's
/// TLS option as it spells it, `sslmode=require`), and what it shows passes the store's own
/// `assert_no_secret`. `shown` is the URL without its secrets, for the test's messages.
/// Returns the message.
#[track_caller]
pub fn assert_refused(
    url: &str,
    shown: &str,
    code: &str,
    mode: &str,
    assert_no_secret: impl Fn(&str),
) -> String {
    let started = Instant::now();
    let error = open_lease_store(url).map(|_| ()).expect_err(shown);
    let text = format!("{error} | {error:?}");
    assert_no_secret(&text);
    assert!(matches!(error, Error::LeaseStoreUnavailable { .. }), "{text}");
    assert_eq!(error.code_str(), "GOTRY_TENANT_LEASE_STORE_UNAVAILABLE", "{text}");
    assert!(error.to_string().starts_with(&format!("{code}: ")), "{text}");
    assert!(text.contains(mode), "{text}");
    println!("{shown} -> {error} (after {:?})", started.elapsed());
    error.to_string()
}
