//! The native half of `@gotry/tenant-state`: the core crate's ids, lease store, tenant lease,
//! lease keeper, durable stores, epoch copies and tenant router, translated for Node.js.
//!
//! This crate only translates. It checks what depends on JavaScript (a number that is not an
//! integer, a lone UTF-16 surrogate, a key that is not a `Uint8Array`), turns core errors into
//! JS errors that carry the stable code and fields, and runs every blocking store call on
//! threads of its own (`executor`) so the event loop keeps turning while SQLite waits for a
//! lock. The thin
//! JavaScript layer in `lib/` maps the codes to the reference's error classes.

// napi-derive registers the exported functions only outside `cfg(test)`, so the test build
// that `cargo clippy --all-targets` makes would call everything behind them unused.
#![cfg_attr(test, allow(dead_code))]

mod args;
mod clock;
mod completions;
mod copies;
mod durable;
mod errors;
mod events;
mod executor;
mod host;
mod ids;
mod keeper;
mod lease;
mod metrics;
mod objects;
mod router;
mod store;
mod tasks;

/// The version of the core this addon was built from (one number for the whole workspace):
/// which build a host has loaded, whatever its `package.json` says.
#[napi_derive::napi]
pub fn version() -> &'static str {
    gotry_tenant_state::VERSION
}
