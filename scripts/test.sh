#!/usr/bin/env bash
# Every test of the project, from a fresh clone: installs what it needs from the package
# registries (npm packages, a Python virtual environment), starts the local MariaDB when it
# is installed but stopped, and runs each language's suite. Exits non-zero on any failure.
#
#   GOTRY_SKIP_MYSQL=1  skip the tests that need a MySQL/MariaDB server (named in the output)
set -euo pipefail
cd "$(dirname "$0")/.."

sections=0
section() {
    printf '\n==== %s ====\n' "$*"
    sections=$((sections + 1))
}

section "shared vectors are what the independent generator writes"
python3 tests/vectors/generate.py --check

section "MariaDB server"
./scripts/mariadb.sh

section "rust: formatting"
cargo fmt --all --check

section "rust: clippy"
cargo clippy --workspace --all-targets -- -D warnings

section "rust: tests (core, C ABI crate, CLI, harness, bindings' Rust parts)"
cargo test --workspace

section "C and C++ over the C ABI"
tests/c/run.sh

section "Node.js addon"
bindings-node/run-tests.sh

section "Python module"
bindings-python/run-tests.sh

section "cross-language contention and crash runs"
tests/cross/run.sh

printf '\n%d passed, 0 failed\n' "$sections"
