#!/usr/bin/env bash
# The release build in one command: every artefact of this version into dist/ (or
# GOTRY_DIST), with their SHA-256 sums in SHA256SUMS:
#   gotry-tenant-state-<V>.tgz                   the npm package (JavaScript, types), which
#                                                 names each platform package as optional
#   gotry-tenant-state-linux-x64-gnu-<V>.tgz      the npm platform package (the addon)
#   gotry_tenant_state-<V>-cp311-abi3-<tag>.whl   the wheel for every CPython from 3.11 up
#   gotry-tenant-state-c-<V>-linux-x64-gnu.tar.gz the C library in its install layout
#                                                 (scripts/install-c.sh's, relocatable)
#   gotry-tenant-<V>-linux-x64-gnu                the operator CLI
# The platform is the one this machine builds for: linux-x64-gnu here (no other Rust target
# is installed, and none can be fetched). Needs cargo, node and npm, python3 (a venv with
# maturin is made in target/venv-package).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
source scripts/workspace.sh
dist="${GOTRY_DIST:-$root/dist}"
version=$(workspace_version)
case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) platform=linux-x64-gnu ;;
    *) echo "package.sh builds linux-x64-gnu only; this is $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac
target=$(workspace_target_dir)
stage="$target/package-stage"
rm -rf "$dist" "$stage"
mkdir -p "$dist" "$stage"
step() { printf '\n---- package: %s ----\n' "$*"; }

# Built one package at a time, each with the features it asks for; the C library, the addon
# and the wheel resolve the same features for every shared dependency, so the core is
# compiled once for the three. The CLI comes last: its tempfile turns on bitflags' `std`,
# which rebuilds the core beneath it.
step "C library: install layout"
c_name="gotry-tenant-state-c-$version-$platform"
scripts/install-c.sh "$stage/$c_name"
strip --strip-unneeded "$stage/$c_name/lib/libgotry_tenant_state.so.$version"
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$dist/$c_name.tar.gz" "$c_name"

step "npm: the platform package and the main package"
platform_dir="$stage/npm-$platform"
mkdir -p "$platform_dir"
addon="gotry-tenant-state.$platform.node"
cargo build --release --locked -p gotry-tenant-state-node
install -m 0755 "$target/release/libgotry_tenant_state_node.so" "$platform_dir/$addon"
strip --strip-unneeded "$platform_dir/$addon"
main_dir="$stage/npm-main"
mkdir -p "$main_dir"
cp -R bindings-node/index.js bindings-node/index.mjs bindings-node/index.d.ts bindings-node/native.d.ts \
    bindings-node/lib bindings-node/README.md "$main_dir/"
# The published manifests: the main one without the development scripts and tools, naming
# the platform package as an optional dependency of the same version (what `napi
# prepublish` writes); the platform one restricted to its os, cpu and libc, so npm installs
# it only where it runs.
node - "$version" "$platform" "$addon" "$main_dir" "$platform_dir" <<'JS'
const fs = require('node:fs');
const path = require('node:path');
const [version, platform, addon, mainDir, platformDir] = process.argv.slice(2);
const source = JSON.parse(fs.readFileSync('bindings-node/package.json', 'utf8'));
if (source.version !== version) throw new Error(`package.json says ${source.version}, Cargo.toml ${version}`);
const platformName = `${source.name}-${platform}`;
const [os, cpu, libc] = platform.split('-');
const { scripts, devDependencies, ...published } = source;
published.optionalDependencies = { [platformName]: version };
fs.writeFileSync(path.join(mainDir, 'package.json'), `${JSON.stringify(published, null, 2)}\n`);
const platformManifest = {
    name: platformName,
    version,
    description: `The ${platform} native addon of ${source.name}`,
    license: source.license,
    os: [os],
    cpu: [cpu],
    ...(libc ? { libc: [libc === 'gnu' ? 'glibc' : libc] } : {}),
    main: addon,
    files: [addon],
    engines: source.engines,
};
fs.writeFileSync(path.join(platformDir, 'package.json'), `${JSON.stringify(platformManifest, null, 2)}\n`);
JS
(cd "$platform_dir" && npm pack --silent --pack-destination "$dist" >/dev/null)
(cd "$main_dir" && npm pack --silent --pack-destination "$dist" >/dev/null)

step "wheel: abi3, manylinux tag as auditwheel judges it"
venv="$target/venv-package"
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet "maturin>=1.16,<2"
"$venv/bin/maturin" build --release --locked --strip --auditwheel check \
    -m bindings-python/Cargo.toml -i "$venv/bin/python" --out "$dist"

step "CLI"
cargo build --release --locked -p gotry-tenant-cli
install -m 0755 "$target/release/gotry-tenant" "$dist/gotry-tenant-$version-$platform"
strip --strip-unneeded "$dist/gotry-tenant-$version-$platform"

step "checksums"
(cd "$dist" && sha256sum -- * >SHA256SUMS)
ls -l "$dist"
