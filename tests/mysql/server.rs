//! Where the Rust tests of the MySQL lease store find their server. Included with
//! `#[path]` by each test crate that needs one, so every crate skips, names and fails the
//! same way.
//!
//! `GOTRY_SKIP_MYSQL=1` skips these tests (each says so on stderr). Otherwise a missing
//! server fails them: a suite that passes because nothing was there to test proves nothing.
//! `GOTRY_MYSQL_URL` names another server than the local default.

// Each including crate uses its own part of this file.
#![allow(dead_code)]

use std::io::Write;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub const SKIP_VAR: &str = "GOTRY_SKIP_MYSQL";
pub const URL_VAR: &str = "GOTRY_MYSQL_URL";
pub const DEFAULT_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// The server's URL, or `None` when the person running the tests asked to skip them.
pub fn server_url(test: &str) -> Option<String> {
    if std::env::var(SKIP_VAR).as_deref() == Ok("1") {
        // Straight to the process's stderr: the test harness captures `eprintln!` of a
        // passing test, and a skip nobody sees is the silent kind.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: {SKIP_VAR}=1 skips every test that needs a MySQL/MariaDB server"
        );
        return None;
    }
    Some(std::env::var(URL_VAR).unwrap_or_else(|_| DEFAULT_URL.to_owned()))
}

/// The URL without its user and password, for messages.
pub fn shown(url: &str) -> String {
    match url
        .strip_prefix("mysql://")
        .and_then(|rest| rest.rsplit_once('@'))
    {
        Some((_, after)) => format!("mysql://{after}"),
        None => url.to_owned(),
    }
}

/// The failure of a test that found no server.
pub fn no_server(url: &str, error: &dyn std::fmt::Display) -> ! {
    panic!(
        "no usable MySQL/MariaDB server at {}: {error}\n\
         start the local one with scripts/mariadb.sh, point {URL_VAR} at another, \
         or set {SKIP_VAR}=1 to skip the tests that need one",
        shown(url)
    )
}

/// A table prefix that no other run or test uses: the process, the time and a counter.
pub fn fresh_prefix() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.subsec_nanos());
    format!(
        "gtt{}_{nanos:x}_{}_",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// `url` with one more query option.
pub fn with_option(url: &str, name: &str, value: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{name}={value}")
}
