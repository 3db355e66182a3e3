#!/usr/bin/env bash
# Builds the C library in release and installs it under PREFIX, as a distribution's package
# would lay it out:
#   PREFIX/include/gotry_tenant_state.h
#   PREFIX/lib/libgotry_tenant_state.so.X.Y.Z  (SONAME libgotry_tenant_state.so.0.Y while the
#       major is 0, where every minor may change the ABI, as cargo-c names it; .so.1 from 1.0)
#   PREFIX/lib/libgotry_tenant_state.so.<soname> and .so, symlinks to it
#   PREFIX/lib/libgotry_tenant_state.a
#   PREFIX/lib/pkgconfig/gotry_tenant_state.pc  (relocatable: its prefix is ${pcfiledir}/../..)
# Then `pkg-config --cflags --libs gotry_tenant_state` (shared) or `--static` (the .a and the
# system libraries it needs) build a host. Needs cargo; Linux only (ELF SONAME).
#
# Usage: scripts/install-c.sh PREFIX
set -euo pipefail
if [[ $# -ne 1 || -z $1 ]]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
prefix="$(cd "$1" && pwd)"
cd "$root"
source scripts/workspace.sh

version=$(workspace_version)
IFS=. read -r major minor _ <<<"$version"
if [[ $major == 0 ]]; then soversion="0.$minor"; else soversion="$major"; fi
soname="libgotry_tenant_state.so.$soversion"
target=$(workspace_target_dir)

# The archive from a plain release build; the shared library linked again with its SONAME
# (given to this crate's link alone, so no dependency is rebuilt for it).
cargo build --release --locked -p gotry-tenant-state-ffi --lib
install -D -m 0644 "$target/release/libgotry_tenant_state.a" "$prefix/lib/libgotry_tenant_state.a"
cargo rustc --release --locked -p gotry-tenant-state-ffi --lib --crate-type cdylib -- \
    -C "link-arg=-Wl,-soname,$soname"
install -D -m 0755 "$target/release/libgotry_tenant_state.so" "$prefix/lib/libgotry_tenant_state.so.$version"
ln -sfn "libgotry_tenant_state.so.$version" "$prefix/lib/$soname"
ln -sfn "$soname" "$prefix/lib/libgotry_tenant_state.so"

install -D -m 0644 include/gotry_tenant_state.h "$prefix/include/gotry_tenant_state.h"
mkdir -p "$prefix/lib/pkgconfig"
# shellcheck disable=SC2016 # ${pcfiledir} is pkg-config's variable, not the shell's
sed -e '/^#/d' -e 's|@PREFIX@|${pcfiledir}/../..|' -e 's|@LIBDIR@|${prefix}/lib|' \
    -e 's|@INCLUDEDIR@|${prefix}/include|' -e "s|@VERSION@|$version|" \
    ffi-c/gotry_tenant_state.pc.in >"$prefix/lib/pkgconfig/gotry_tenant_state.pc"

echo "installed gotry_tenant_state $version ($soname) under $prefix"
