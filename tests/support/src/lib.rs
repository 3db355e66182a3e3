//! What the Rust tests of the workspace share, so that every test crate finds, names, skips
//! and fails the same way, and every store is held to one contract. A dev-dependency only.
//!
//! It depends on the core, which its integration tests and benches link once, with these
//! modules. The core's own unit tests are a second copy of the core crate, whose types are
//! not these: they can use only `mysql` and `moto`, which name none.

pub mod conformance;
pub mod faulty;
pub mod lines;
pub mod moto;
pub mod mysql;
pub mod mysql_fixture;
pub mod postgres;
pub mod proxy;
pub mod pruning;
pub mod tls;
