//! With `GOTRY_SKIP_POSTGRES=1`, sets `cfg(gotry_skip_postgres)`, under which the test that
//! needs a PostgreSQL server is `#[ignore]`d with the reason (libtest lists the skip).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(gotry_skip_postgres)");
    println!("cargo::rerun-if-env-changed=GOTRY_SKIP_POSTGRES");
    if std::env::var_os("GOTRY_SKIP_POSTGRES").is_some_and(|value| value == "1") {
        println!("cargo::rustc-cfg=gotry_skip_postgres");
    }
}
