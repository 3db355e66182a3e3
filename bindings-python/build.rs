//! Lets `cargo test` binaries find the libpython they were linked against (pyenv's, which
//! is not on the loader's default path) through an rpath. Wheels built by maturin do not
//! link libpython, and pyo3-build-config adds nothing to them.

fn main() {
    pyo3_build_config::add_libpython_rpath_link_args();
}
