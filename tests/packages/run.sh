#!/usr/bin/env bash
# Proof that the release artefacts install and work where there is no Rust toolchain:
# scripts/package.sh builds them into a scratch dist/, then, with every folder holding cargo
# or rustc removed from PATH, in fresh temporary folders:
#   - npm installs the two tarballs; a CommonJS and an ES module program run;
#   - a venv of the machine's CPython and one of a second CPython (pyenv's 3.13, when it is
#     there; named when not) pip-install the wheel; a program runs and mypy --strict checks it;
#     a CPython older than the wheel's floor (3.10) is refused by pip;
#   - the C tarball is unpacked into a prefix; a C and a C++ program build with
#     `pkg-config --cflags --libs` (shared) and with `pkg-config --static`, and run.
# Each program checks the shared id vectors, one acquire/renew/release on a file store and
# the version. Last, every artefact's version is compared with the workspace's.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
source scripts/workspace.sh
here="$root/tests/packages"
version=$(workspace_version)
work="$(mktemp -d "${TMPDIR:-/tmp}/gotry-packages.XXXXXX")"
trap 'rm -rf "$work"' EXIT
dist="$work/dist"
vectors="$root/tests/vectors/ids.json"
step() { printf '\n---- packages: %s ----\n' "$*"; }

step "scripts/package.sh"
started=$SECONDS
GOTRY_DIST="$dist" scripts/package.sh
echo "packaging took $((SECONDS - started)) s"
(cd "$dist" && sha256sum --check --quiet SHA256SUMS)

# PATH without the Rust toolchain: every folder that holds cargo or rustc goes.
clean_path=
IFS=: read -r -a path_dirs <<<"$PATH"
for dir in "${path_dirs[@]}"; do
    [[ -e $dir/cargo || -e $dir/rustc ]] && continue
    clean_path="${clean_path:+$clean_path:}$dir"
done
no_rust() { env PATH="$clean_path" CARGO_HOME=/nonexistent RUSTUP_HOME=/nonexistent "$@"; }
if no_rust sh -c 'command -v cargo || command -v rustc'; then
    echo "cargo or rustc is still on the cleaned PATH" >&2
    exit 1
fi

step "npm: install the tarballs into a fresh project"
project="$work/node-project"
mkdir -p "$project/state"
printf '{ "name": "gotry-packages-smoke", "version": "1.0.0", "private": true }\n' >"$project/package.json"
(cd "$project" && no_rust npm install --no-audit --no-fund --ignore-scripts \
    "$dist/gotry-tenant-state-linux-x64-gnu-$version.tgz" "$dist/gotry-tenant-state-$version.tgz")
cp "$here/checks.cjs" "$here/smoke.cjs" "$here/smoke.mjs" "$project/"
(cd "$project" && no_rust node smoke.cjs "$vectors" "$project/state" "$version")
(cd "$project" && no_rust node smoke.mjs "$vectors" "$project/state" "$version")
for shipped in index.d.ts native.d.ts; do
    test -f "$project/node_modules/@gotry/tenant-state/$shipped"
done
if [[ -e $project/node_modules/@gotry/tenant-state/gotry-tenant-state.node ]]; then
    echo "the main npm package carries an addon of its own" >&2
    exit 1
fi

wheel=$(ls "$dist"/gotry_tenant_state-"$version"-cp311-abi3-*.whl)
step "wheel: $(basename "$wheel")"
venv_tools="$root/target/venv-package"
"$venv_tools/bin/python" -m pip install --quiet auditwheel
"$venv_tools/bin/auditwheel" show "$wheel"
python_checked=()
python_smoke() {
    local python=$1 release venv
    release=$("$python" -c 'import platform; print(platform.python_version())')
    venv="$work/venv-$release"
    "$python" -m venv "$venv"
    no_rust "$venv/bin/python" -m pip install --quiet --no-cache-dir "$wheel" "mypy>=1.10"
    mkdir -p "$venv/state"
    no_rust "$venv/bin/python" "$here/smoke.py" "$vectors" "$venv/state" "$version"
    (cd "$work" && no_rust "$venv/bin/python" -m mypy --strict --no-incremental "$here/smoke.py")
    python_checked+=("$release")
}
python_smoke "$(command -v python3)"
second=
for candidate in /root/.pyenv/versions/3.13*/bin/python3 /root/.pyenv/versions/3.12*/bin/python3 /usr/bin/python3.1[2-9]; do
    if [[ -x $candidate ]]; then second=$candidate; break; fi
done
if [[ -n $second ]]; then
    python_smoke "$second"
else
    echo "SKIPPED: no second CPython (3.12 or later) on this machine"
fi
older=
for candidate in /root/.pyenv/versions/3.10*/bin/python3; do
    [[ -x $candidate ]] && older=$candidate
done
if [[ -n $older ]]; then
    "$older" -m venv "$work/venv-old"
    if no_rust "$work/venv-old/bin/python" -m pip install --quiet --no-index "$wheel" 2>"$work/old.log"; then
        echo "pip installed a cp311-abi3 wheel on $("$older" --version)" >&2
        exit 1
    fi
    echo "$("$older" --version): refused, as the cp311 floor says"
else
    echo "SKIPPED: no CPython 3.10 to show the floor refused"
fi
echo "wheel works on CPython ${python_checked[*]}"

step "C and C++ from the unpacked C tarball, with pkg-config"
c_name="gotry-tenant-state-c-$version-linux-x64-gnu"
tar -C "$work" -xzf "$dist/$c_name.tar.gz"
prefix="$work/$c_name"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
libdir=$(pkg-config --variable=libdir gotry_tenant_state)
read -r key issuer subject expected < <(python3 -c '
import json, sys
v = json.load(open(sys.argv[1]))["derive"][0]
print(v["key_hex"], v["issuer"], v["subject"], v["expect"]["ledger_tenant_id"])' "$vectors")
build="$work/c-build"
mkdir -p "$build"
read -r -a shared_flags <<<"$(pkg-config --cflags --libs gotry_tenant_state) -Wl,-rpath,$libdir"
# The static link names the archive itself: with both in the folder, -l takes the .so.
read -r -a static_flags <<<"$(pkg-config --static --cflags --libs gotry_tenant_state |
    sed 's/-lgotry_tenant_state\b/-l:libgotry_tenant_state.a/')"
no_rust gcc -std=c11 -Wall -Wextra -Werror "$here/smoke.c" "${shared_flags[@]}" -o "$build/smoke-shared"
no_rust g++ -std=c++17 -Wall -Wextra -Werror "$here/smoke.cpp" "${shared_flags[@]}" -o "$build/smoke-cpp"
no_rust gcc -std=c11 -Wall -Wextra -Werror "$here/smoke.c" "${static_flags[@]}" -o "$build/smoke-static"
no_rust g++ -std=c++17 -Wall -Wextra -Werror "$here/smoke.cpp" "${static_flags[@]}" -o "$build/smoke-cpp-static"
soname=$(readelf -d "$prefix/lib/libgotry_tenant_state.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ -n $soname && -L $prefix/lib/$soname ]] || { echo "no SONAME symlink ($soname)" >&2; exit 1; }
readelf -d "$build/smoke-shared" | grep -q "NEEDED.*\[$soname\]" || { echo "smoke-shared does not need $soname" >&2; exit 1; }
for program in smoke-static smoke-cpp-static; do
    if readelf -d "$build/$program" | grep -q 'NEEDED.*gotry'; then
        echo "$program still needs the shared library" >&2
        exit 1
    fi
done
for program in smoke-shared smoke-cpp smoke-static smoke-cpp-static; do
    printf "%s: " "$program"
    no_rust "$build/$program" "$key" "$issuer" "$subject" "$expected" "$build/$program.db"
done

step "one version in every artefact: $version"
check_version() {
    if [[ $2 != "$version" ]]; then
        echo "$1 says '$2', the workspace $version" >&2
        exit 1
    fi
    echo "$1: $2"
}
check_version "CLI --version" "$(no_rust "$dist/gotry-tenant-$version-linux-x64-gnu" --version | awk '{print $NF}')"
check_version "pkg-config --modversion" "$(pkg-config --modversion gotry_tenant_state)"
check_version "header GOTRY_TENANT_STATE_VERSION" \
    "$(sed -n 's/^#define GOTRY_TENANT_STATE_VERSION "\(.*\)"$/\1/p' "$prefix/include/gotry_tenant_state.h")"
check_version "header MAJOR.MINOR.PATCH" "$(for part in MAJOR MINOR PATCH; do
    sed -n "s/^#define GOTRY_TENANT_STATE_VERSION_$part //p" "$prefix/include/gotry_tenant_state.h"
done | paste -sd.)"
for pkg in tenant-state tenant-state-linux-x64-gnu; do
    check_version "npm @gotry/$pkg" "$(node -p "require('$project/node_modules/@gotry/$pkg/package.json').version")"
done
check_version "npm optionalDependencies" \
    "$(node -p "require('$project/node_modules/@gotry/tenant-state/package.json').optionalDependencies['@gotry/tenant-state-linux-x64-gnu']")"
check_version "wheel metadata" "$("$work/venv-${python_checked[0]}/bin/python" -c 'from importlib.metadata import version; print(version("gotry-tenant-state"))')"

step "artefacts"
(cd "$dist" && du -h -- * | sort -k2)
echo "platforms: linux-x64-gnu (npm, wheel, C, CLI); packages stage took $((SECONDS - started)) s"
