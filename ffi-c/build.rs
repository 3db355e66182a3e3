//! Link settings of the C library.
//!
//! A Rust cdylib exports every `#[no_mangle]` symbol of every crate it is built from, so the
//! `.so` would also export the C API of a dependency (crc-fast, which the S3 client brings:
//! `crc_fast_*`), which a host linking that library's own copy would then bind to one or the
//! other by load order. `--exclude-libs,ALL` makes the symbols of the linked archives (every
//! dependency) local: the `.so` exports the `gotry_*` functions of this crate and nothing
//! else. (Its bundled SQLite is not exported either way; `tests/c/run.sh` checks both.)

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
    }
}
