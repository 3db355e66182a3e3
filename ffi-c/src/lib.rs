//! The C ABI of gotry-tenant-state, for C and C++ hosts.
//!
//! Every rule lives in the core crate; this crate only translates: raw arguments into
//! checked Rust values, core errors into a status and an error object, and panics into a
//! status instead of an aborted host. The conventions C callers rely on are written once,
//! in the preamble of the generated header (`cbindgen.toml`), and repeated by each item.

#![deny(missing_docs)]
// A C signature spells each text as pointer + length and each result as an out-parameter.
#![allow(clippy::too_many_arguments)]

#[macro_use]
mod boundary;
mod batch;
mod clock;
mod copies;
mod durable;
mod error;
mod host;
mod ids;
mod keeper;
mod lease;
mod metrics;
mod records;
mod router;
mod status;
mod store;
mod version;

pub use batch::*;
pub use clock::*;
pub use copies::*;
pub use durable::*;
pub use error::*;
pub use host::*;
pub use ids::*;
pub use keeper::*;
pub use lease::*;
pub use metrics::*;
pub use records::*;
pub use router::*;
pub use status::*;
pub use store::*;
pub use version::*;

/// Bytes a buffer needs for a ledger tenant id: `t-`, 32 hex digits and the NUL.
pub const GOTRY_LEDGER_TENANT_ID_BUFFER_LEN: usize = 35;
/// Bytes a buffer needs for a prompt cache partition: `pc-`, 32 hex digits and the NUL.
pub const GOTRY_PROMPT_CACHE_PARTITION_BUFFER_LEN: usize = 36;
/// Bytes a buffer needs for any lease key: the longest organization id (63), `/`, a ledger
/// tenant id (34) and the NUL.
pub const GOTRY_LEASE_KEY_BUFFER_LEN: usize = 99;
/// Shortest organization key accepted, in bytes: a shorter key would make ids guessable.
pub const GOTRY_MIN_ORGANIZATION_KEY_BYTES: usize = 32;
/// Longest issuer or subject accepted, in UTF-8 bytes.
pub const GOTRY_MAX_CLAIM_BYTES: usize = 512;
/// Shortest lease a store grants, in milliseconds.
pub const GOTRY_MIN_LEASE_TTL_MS: i64 = 100;
/// Longest lease a store grants, in milliseconds (ten minutes).
pub const GOTRY_MAX_LEASE_TTL_MS: i64 = 600_000;
/// Longest key or owner, in UTF-16 code units: the unit JavaScript's `length` counts, so that
/// every language accepts exactly the same strings. A 4-byte UTF-8 character counts two.
pub const GOTRY_MAX_TEXT_UTF16_UNITS: usize = 200;

// cbindgen needs literals for the header; these make the build fail if the core moves.
const _: () = {
    use gotry_core::{ids, lease_store};
    assert!(GOTRY_LEDGER_TENANT_ID_BUFFER_LEN == ids::LEDGER_TENANT_ID_LEN + 1);
    assert!(GOTRY_PROMPT_CACHE_PARTITION_BUFFER_LEN == ids::PROMPT_CACHE_PARTITION_LEN + 1);
    assert!(GOTRY_LEASE_KEY_BUFFER_LEN == ids::MAX_ORGANIZATION_ID_LEN + 1 + ids::LEDGER_TENANT_ID_LEN + 1);
    assert!(GOTRY_MIN_ORGANIZATION_KEY_BYTES == ids::MIN_ORGANIZATION_KEY_BYTES);
    assert!(GOTRY_MAX_CLAIM_BYTES == ids::MAX_CLAIM_BYTES);
    assert!(GOTRY_MIN_LEASE_TTL_MS == lease_store::MIN_LEASE_TTL_MS);
    assert!(GOTRY_MAX_LEASE_TTL_MS == lease_store::MAX_LEASE_TTL_MS);
    assert!(GOTRY_MAX_TEXT_UTF16_UNITS == lease_store::MAX_TEXT_UTF16_UNITS);
};

#[cfg(test)]
mod header_test;
