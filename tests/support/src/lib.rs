//! What the Rust tests of the workspace share, so that every test crate finds, names, skips
//! and fails the same way. A dev-dependency only.

pub mod faulty;
pub mod mysql;
