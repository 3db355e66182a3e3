//! With `GOTRY_SKIP_MYSQL=1`, sets `cfg(gotry_skip_mysql)`, under which every test that needs
//! a MySQL/MariaDB server is `#[ignore]`d with the reason: libtest then lists each skip,
//! where a test that returned early would report `ok`.

fn main() {
    // The same for PostgreSQL: `GOTRY_SKIP_POSTGRES=1` sets `cfg(gotry_skip_postgres)`.
    println!("cargo::rustc-check-cfg=cfg(gotry_skip_postgres)");
    println!("cargo::rerun-if-env-changed=GOTRY_SKIP_POSTGRES");
    if std::env::var_os("GOTRY_SKIP_POSTGRES").is_some_and(|value| value == "1") {
        println!("cargo::rustc-cfg=gotry_skip_postgres");
    }
    println!("cargo::rustc-check-cfg=cfg(gotry_skip_mysql)");
    println!("cargo::rerun-if-env-changed=GOTRY_SKIP_MYSQL");
    if std::env::var_os("GOTRY_SKIP_MYSQL").is_some_and(|value| value == "1") {
        println!("cargo::rustc-cfg=gotry_skip_mysql");
    }
}
