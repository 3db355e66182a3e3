//! Which durable store a `copies` command reads, from `--durable`, and how it is named
//! without its credentials.
//!
//! As with `--store`, a value that starts with a URL scheme (`file:`, `s3://`) is handed to
//! the core's `open_durable_store_read_only` untouched, so every backend the core learns is
//! usable here without a change; anything else is the path of a folder. Every `copies`
//! command (and `router status`) only reads the store, so it is opened read-only whatever
//! names it: nothing is created in it (a read-only mount works), and a folder that does not
//! exist, by path or by `file:` URL, is the same storage error naming it, never a new store.
//!
//! An S3 URL may hold credentials (`s3://KEY:SECRET@bucket/prefix`, or a query parameter).
//! Every secret it holds is masked in whatever the command prints, even in a message from the
//! core that quotes one on its own (a key id, a decoded secret), on top of the masking of
//! every report (`crate::secrets`): what an operator pastes into a ticket must not carry a key.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::Arc;

use gotry_tenant_state::{open_durable_store_read_only, DirectoryDurableStore, DurableStore, Error};

use crate::failure::{Exit, Failure};
use crate::store::has_scheme;
use gotry_tenant_state::secrets::{self, is_secret_name, shown_argument, MASK};

/// The store `copies` commands use when `--durable` is not given: beside the default lease
/// store, `./gotry-leases.db`.
pub const DEFAULT_DURABLE: &str = "./gotry-copies";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurableTarget {
    /// A folder named by its path.
    Folder(PathBuf),
    /// A URL for the core to open.
    Url(String),
}

impl DurableTarget {
    pub fn parse(value: &OsStr) -> DurableTarget {
        match value.to_str() {
            Some(text) if has_scheme(text) => DurableTarget::Url(text.to_owned()),
            _ => DurableTarget::Folder(PathBuf::from(OsString::from(value))),
        }
    }

    /// How the store is named before it is open.
    pub fn describe(&self) -> String {
        match self {
            DurableTarget::Folder(path) => shown_argument(&path.display().to_string()).into_owned(),
            DurableTarget::Url(url) => self.mask(&shown_argument(url)),
        }
    }

    pub fn open(&self) -> Result<Arc<dyn DurableStore>, Failure> {
        let opened = match self {
            DurableTarget::Folder(path) => DirectoryDurableStore::open_read_only(path)
                .map(|store| Arc::new(store) as Arc<dyn DurableStore>),
            DurableTarget::Url(url) => open_durable_store_read_only(url),
        };
        opened.map_err(|error| {
            let failure = self
                .failure(error)
                .context(format!("cannot open the durable store {}", self.describe()));
            match failure.exit {
                Exit::Invalid => failure.hint(
                    "--durable takes a folder path or a URL such as file:///srv/gotry-copies or \
                     s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1",
                ),
                Exit::Storage => failure.hint(
                    "pass --durable with the folder or URL of an existing durable store (the default is ./gotry-copies)",
                ),
                _ => failure,
            }
        })
    }

    /// The report of a core error met while using this store, with its secrets masked. A
    /// storage error here comes from the durable store's folder or from the local disk a copy
    /// is laid out on to be checked, so the hint names those, not the lease store's `--store`
    /// (which most commands that read copies do not take).
    pub fn failure(&self, error: Error) -> Failure {
        let mut failure = Failure::from(error);
        if failure.exit == Exit::Storage {
            failure = failure.hint(
                "check that this user can read the store --durable names, and that the temporary \
                 folder (TMPDIR), where a copy is laid out to be checked, is writable and has room",
            );
        }
        failure.message = self.mask(&failure.message);
        failure.hint = self.mask(&failure.hint);
        failure
    }

    /// `text` with every secret of the URL replaced by `***`, wherever it appears (a backend
    /// may quote a key id or a decoded secret on its own), and every other credential-shaped
    /// text masked as every report is.
    pub fn mask(&self, text: &str) -> String {
        let mut masked = text.to_owned();
        if let DurableTarget::Url(url) = self {
            for secret in secrets(url) {
                masked = masked.replace(&secret, MASK);
            }
        }
        secrets::mask(&masked).into_owned()
    }
}

/// The credentials a URL may hold, raw and percent-decoded, longest first (so that a secret
/// that contains another is masked whole): the user and password before `@`, and the values
/// of query parameters whose name says they are secret.
fn secrets(url: &str) -> Vec<String> {
    let (before_query, query) = url.split_once('?').unwrap_or((url, ""));
    let mut found = Vec::new();
    if let Some((_, rest)) = before_query.split_once("://") {
        // The last `@`: a secret may hold `/` or `@`, a bucket and an object prefix never do.
        if let Some((userinfo, _)) = rest.rsplit_once('@') {
            found.push(userinfo.to_owned());
            found.extend(userinfo.split(':').map(str::to_owned));
        }
    }
    for pair in query.split('&') {
        if let Some((name, value)) = pair.split_once('=') {
            if is_secret_name(name) {
                found.push(value.to_owned());
            }
        }
    }
    let decoded: Vec<String> = found.iter().filter_map(|s| percent_decoded(s)).collect();
    found.extend(decoded);
    found.retain(|s| !s.is_empty());
    found.sort_by_key(|s| std::cmp::Reverse(s.len()));
    found.dedup();
    found
}

/// `%XX` escapes (and `+` in a query) decoded, when there are any and the result is UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    if !text.contains(['%', '+']) {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_folders_are_told_apart() {
        let url = |s: &str| DurableTarget::Url(s.to_owned());
        let folder = |s: &str| DurableTarget::Folder(PathBuf::from(s));
        let cases = [
            ("file:///srv/copies", url("file:///srv/copies")),
            ("file:copies", url("file:copies")),
            ("s3://k:s@bucket/p?region=x", url("s3://k:s@bucket/p?region=x")),
            ("./gotry-copies", folder("./gotry-copies")),
            ("/srv/copies", folder("/srv/copies")),
            ("copies", folder("copies")),
        ];
        for (arg, expected) in cases {
            assert_eq!(DurableTarget::parse(OsStr::new(arg)), expected, "{arg}");
        }
    }

    #[test]
    fn every_secret_of_a_url_is_masked() {
        let target = DurableTarget::parse(OsStr::new(
            "s3://AKIAEXAMPLE:wJalr%2FK7MDENG%2Bbxx@copies/prod?endpoint=http://h:9000&region=eu&session_token=FwoG%3D%3D&sig=PRESIGNED42",
        ));
        assert_eq!(
            target.describe(),
            "s3://***@copies/prod?endpoint=http://h:9000&region=eu&session_token=***&sig=***"
        );
        let quoted = "denied for AKIAEXAMPLE with wJalr/K7MDENG+bxx (raw wJalr%2FK7MDENG%2Bbxx), token FwoG==, sig PRESIGNED42; region eu";
        let masked = target.mask(quoted);
        for secret in ["AKIAEXAMPLE", "wJalr", "K7MDENG", "FwoG", "PRESIGNED42"] {
            assert!(!masked.contains(secret), "{secret} leaked: {masked}");
        }
        // What is not a secret stays readable.
        assert!(masked.ends_with("region eu"), "{masked}");
        let failure = target.failure(Error::DurableStoreUnavailable {
            message: "AKIAEXAMPLE:wJalr%2FK7MDENG%2Bbxx is refused".into(),
            backend_code: "InvalidAccessKeyId".into(),
        });
        assert_eq!(failure.message, "*** is refused (InvalidAccessKeyId)");
        // A folder has no secrets of its own, but a path shaped like a credential (a URL
        // mistyped into a path) is masked all the same; other text is left as it is.
        let folder = DurableTarget::parse(OsStr::new("s3//KEY:SECRET@copies"));
        assert_eq!(folder.describe(), "s3//***@copies");
        assert_eq!(
            folder.mask("./copies@2024 is missing"),
            "./copies@2024 is missing"
        );
    }

    /// A command that reads copies names no lease store: its storage errors point at what it
    /// does use.
    #[test]
    fn a_storage_error_points_at_the_durable_store_and_the_local_disk() {
        let target = DurableTarget::parse(OsStr::new("./copies"));
        let failure = target.failure(Error::Storage {
            code: "ENOSPC".into(),
            message: "no space left on device".into(),
        });
        assert_eq!(failure.exit, Exit::Storage);
        assert!(
            failure.hint.contains("--durable") && failure.hint.contains("TMPDIR"),
            "{}",
            failure.hint
        );
        assert!(!failure.hint.contains("--store"), "{}", failure.hint);
    }

    #[test]
    fn percent_escapes_decode_only_when_well_formed() {
        assert_eq!(percent_decoded("a%2Fb+c").as_deref(), Some("a/b c"));
        assert_eq!(percent_decoded("100%").as_deref(), Some("100%"));
        assert_eq!(percent_decoded("plain"), None);
        assert_eq!(percent_decoded("%ff"), None);
    }
}
