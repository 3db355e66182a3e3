//! The committed header must be what cbindgen generates from this source now.
//!
//! C hosts compile against `include/gotry_tenant_state.h`, not against this crate, so a
//! stale header would let them call a function with the wrong arguments. The test never
//! writes into the source tree unless asked: `GOTRY_UPDATE_HEADER=1 cargo test -p
//! gotry-tenant-state-ffi header` regenerates it.

use std::path::Path;

/// The version macros, from the workspace's version: cbindgen writes no string constants,
/// and numbers typed out beside `Cargo.toml` would drift from it.
fn version_macros() -> String {
    format!(
        "\n/** The version of this header, as gotry_version() spells that of the library loaded. */\n\
         #define GOTRY_TENANT_STATE_VERSION \"{}\"\n\
         /** Its major number: a host built against another may not run with this library. */\n\
         #define GOTRY_TENANT_STATE_VERSION_MAJOR {}\n\
         /** Its minor number: while the major is 0, a new minor may change the ABI. */\n\
         #define GOTRY_TENANT_STATE_VERSION_MINOR {}\n\
         /** Its patch number. */\n\
         #define GOTRY_TENANT_STATE_VERSION_PATCH {}",
        env!("CARGO_PKG_VERSION"),
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
    )
}

#[test]
fn committed_header_matches_cbindgen() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    config.after_includes = Some(version_macros());
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut generated = Vec::new();
    bindings.write(&mut generated);

    let committed_path = crate_dir.join("../include/gotry_tenant_state.h");
    if std::env::var_os("GOTRY_UPDATE_HEADER").is_some_and(|v| v == "1") {
        std::fs::write(&committed_path, &generated).expect("write the header");
        return;
    }
    let committed = std::fs::read(&committed_path).unwrap_or_default();
    if committed != generated {
        let first_difference = committed
            .split(|&b| b == b'\n')
            .zip(generated.split(|&b| b == b'\n'))
            .position(|(a, b)| a != b)
            .map_or_else(
                || "in its length".to_owned(),
                |line| format!("at line {}", line + 1),
            );
        panic!(
            "include/gotry_tenant_state.h differs from what cbindgen generates now ({first_difference}); \
             regenerate it with GOTRY_UPDATE_HEADER=1 cargo test -p gotry-tenant-state-ffi header"
        );
    }
}
