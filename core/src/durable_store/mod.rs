//! The durable store: where a tenant's copies outlive the replica that wrote them.
//!
//! Four operations, each blocking until the backend answered: a create-only put, a get, a
//! list by prefix and a delete. Create-only is the one that carries the fence: every object
//! of a copy has exactly one writer, so a stale holder can add objects under its own epoch
//! but can never replace what another holder wrote. Every failure to reach or use a backend
//! is DURABLE_STORE_UNAVAILABLE with the backend's own code kept beside it.
//!
//! Keys are relative, `/`-separated names built from `[A-Za-z0-9._-]` segments that do not
//! start with `.`: the copies' layout only needs those, a key that cannot escape its folder
//! or mean two things on two backends needs no escaping rules, and names starting with `.`
//! stay free for a backend's own bookkeeping (the directory backend's staging folder).

#[cfg(test)]
pub(crate) mod conformance;
pub mod dir;
#[cfg(feature = "s3")]
pub mod s3;
mod url;

pub use url::{open_durable_store, open_durable_store_read_only};

use crate::errors::{Error, Result};

/// What a create-only put found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The object did not exist and now holds exactly the bytes given.
    Created,
    /// An object of that name was already there; it was left as it was.
    AlreadyExists,
}

/// One listed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
}

/// A durable object store. Implementations are safe to share between threads; async hosts
/// call them off their event loop.
pub trait DurableStore: Send + Sync + std::fmt::Debug {
    /// Creates `key` holding `bytes`, unless an object of that name exists. `Created` is
    /// returned only once the object survives power loss.
    fn put_new(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome>;
    /// The whole object, or `None` when there is none of that name.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// The object's bytes handed to `take` part by part, in order, as they arrive, while
    /// `take` answers `true`; `false` when there is no object of that name. A restore hashes
    /// and writes each part while the next one comes, and holds no whole object in memory: a
    /// fresh buffer of a piece's size cost more than hashing it here. `take`'s errors come
    /// back as they are. This default hands over the whole object at once.
    fn get_parts(&self, key: &str, take: &mut dyn FnMut(&[u8]) -> Result<bool>) -> Result<bool> {
        match self.get(key)? {
            Some(bytes) => take(&bytes).map(|_| true),
            None => Ok(false),
        }
    }
    /// Every object whose key starts with `prefix`, ordered by key.
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>>;
    /// The objects of [`DurableStore::list`] whose keys sort after `after`: a copy checks its
    /// tenure's prefix past the copies it knows of without listing those again, so a tenure of
    /// many copies does not pay for all of them at each one. Stores that can skip what sorts
    /// before `after` (S3's start-after, a folder walk that does not descend) do; this
    /// default filters a whole listing.
    fn list_after(&self, prefix: &str, after: &str) -> Result<Vec<ObjectInfo>> {
        let mut listed = self.list(prefix)?;
        listed.retain(|object| object.key.as_str() > after);
        Ok(listed)
    }
    /// Removes `key`; removing an object that is not there is not an error.
    fn delete(&self, key: &str) -> Result<()>;
    /// Removes every one of `keys`, as [`DurableStore::delete`] does each, all of them durably
    /// by the answer but not one by one: a backend whose removal waits for a flush (the
    /// directory store's folder) flushes each folder once, so a collection of many copies costs
    /// what one does. No order between them survives a power cut; a caller that needs one
    /// (manifests before their objects) makes two calls.
    fn delete_all(&self, keys: &[String]) -> Result<()> {
        keys.iter().try_for_each(|key| self.delete(key))
    }
    /// Where the store is, for messages and status: the URL without any credential.
    fn location(&self) -> String;
    /// Whether this machine's file system answers the store's calls (no network round trip):
    /// a copy then lists its tenure's prefix itself after taking the snapshot, rather than on
    /// a thread of its own beside it, which costs more than listing a folder.
    fn answers_at_once(&self) -> bool {
        false
    }
    /// Says that this store will soon be asked to put `key`, so that a backend whose put costs
    /// more than its bytes can do that part ahead of time, off the caller's path: the copies
    /// call it for the next manifest of a tenure, which a strict copy waits for. A hint: it
    /// answers nothing, may do nothing, and a put of `key` stays create-only whatever it did.
    /// Until the put, a backend may show `key` as an empty object (the directory store does;
    /// the copies' readers pass an empty manifest over as not yet written).
    fn reserve(&self, _key: &str) {}
    /// Removes what writers killed mid-put left behind, never what a live writer still
    /// uses. Backends whose puts leave nothing behind have nothing to do.
    fn remove_leftovers(&self) -> Result<()> {
        Ok(())
    }
}

/// Refuses keys outside the safe alphabet, so no key reaches a backend that could name a
/// parent folder, an absolute path or two different objects.
pub fn assert_object_key(key: &str) -> Result<&str> {
    let safe_segment = |segment: &str| {
        !segment.is_empty()
            && !segment.starts_with('.')
            && segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    if key.len() <= 1024 && key.split('/').all(safe_segment) {
        Ok(key)
    } else {
        Err(Error::invalid_argument(format!(
            "an object key is made of /-separated [A-Za-z0-9._-] segments not starting with '.', got {key:?}"
        )))
    }
}

/// Refuses a change to `key` in a store opened for reading (the CLI's read-only commands) as
/// a read-only mount would, EROFS; `location` names the store in the message.
pub(crate) fn assert_writable<L: std::fmt::Display>(
    read_only: bool,
    key: &str,
    location: impl FnOnce() -> L,
) -> Result<()> {
    if read_only {
        return Err(Error::durable(
            "EROFS",
            format!("{key} cannot be changed: {} was opened for reading", location()),
        ));
    }
    Ok(())
}

/// A list prefix is a key, or a key followed by `/`, or empty for everything. `/` alone is
/// refused: it names no folder of the store, and answering `[]` would read as "no objects".
pub(crate) fn assert_prefix(prefix: &str) -> Result<&str> {
    if !prefix.is_empty() {
        assert_object_key(prefix.strip_suffix('/').unwrap_or(prefix))?;
    }
    Ok(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_cannot_escape_or_alias() {
        for good in [
            "a",
            "orgs/o-1/tenants/t-x/epochs/00000000000000000001/manifest.json",
        ] {
            assert!(assert_object_key(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a//b",
            "../a",
            "a/./b",
            "a b",
            "a\\b",
            "é",
            "a\0",
            ".staging/x",
            "a/.b",
        ] {
            assert!(
                matches!(assert_object_key(bad), Err(Error::InvalidArgument { .. })),
                "{bad:?}"
            );
        }
        assert!(assert_prefix("").is_ok() && assert_prefix("a/b/").is_ok() && assert_prefix("a/b").is_ok());
        for bad in ["/", "//", "/a", "a//", "../", "./", ".staging/", "a/./"] {
            assert!(
                matches!(assert_prefix(bad), Err(Error::InvalidArgument { .. })),
                "{bad:?}"
            );
        }
    }
}
