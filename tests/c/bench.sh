#!/usr/bin/env bash
# Benchmarks of the C ABI against the release library (a release build of this crate only;
# the core's release artifacts are shared with the other bindings). Prints figures and
# ratios to baselines measured in the same run; fails only when something cannot run.
set -euo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
build=$root/tests/c/build/bench
rm -rf "$build"
mkdir -p "$build"
cargo build -q --release -p gotry-tenant-state-ffi
target=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
lib=$target/release
gcc -std=c11 -O2 -Wall -Wextra -Werror -I"$root/include" tests/c/bench.c \
    -L"$lib" -lgotry_tenant_state -Wl,-rpath,"$lib" -o "$build/bench"
"$build/bench" "$build"
