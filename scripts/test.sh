#!/usr/bin/env bash
# Every test of the project, from a fresh clone: installs what it needs from the package
# registries (npm packages, a Python virtual environment), starts the local MariaDB when it
# is installed but stopped, and runs each language's suite. Exits non-zero on any failure.
#
#   GOTRY_SKIP_MYSQL=1  skip the tests that need a MySQL/MariaDB server (named in the output)
#   GOTRY_SKIP_POSTGRES=1  skip the tests that need a PostgreSQL server (named in the output)
#   GOTRY_SKIP_S3=1     skip the tests that need an S3-compatible server (named in the output)
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

section "a second MariaDB server that takes only TLS (the MySQL store's TLS tests; stops when this script ends)"
eval "$(./scripts/mariadb-tls.sh --watch $$ || echo 'exit 1')"

section "PostgreSQL server"
./scripts/postgres.sh

section "a second PostgreSQL server that takes only TLS (the PostgreSQL store's TLS tests; stops when this script ends)"
eval "$(./scripts/postgres-tls.sh --watch $$ || echo 'exit 1')"

section "S3-compatible server (moto, from PyPI) for the durable store"
GOTRY_MOTO_SERVER="$(./scripts/s3-server.sh)"
export GOTRY_MOTO_SERVER
if [[ -n "$GOTRY_MOTO_SERVER" ]]; then
    # The Rust tests start servers of their own; the other languages share this one.
    s3_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    "$GOTRY_MOTO_SERVER" -H 127.0.0.1 -p "$s3_port" >target/moto.log 2>&1 &
    s3_pid=$!
    trap 'kill "$s3_pid" 2>/dev/null || true' EXIT
    python3 - "$s3_port" <<'PY'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/gotry-test"
for _ in range(200):
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="PUT"), timeout=2)
        break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit(f"moto did not answer on {url}")
PY
    echo "moto on 127.0.0.1:${s3_port} (pid ${s3_pid})"
fi
# Each suite gets a prefix of its own in the shared bucket (GOTRY_S3_URL), so that their
# tenants' copies never meet; empty without a server, and each suite names what it skips.
s3_url() {
    [[ -n "$GOTRY_MOTO_SERVER" ]] || return 0
    printf 's3://test:test@gotry-test/%s?endpoint=http://127.0.0.1:%s&region=us-east-1' "$1" "$s3_port"
}

section "libfaketime (Debian's faketime) for the clock-jump runs"
if [[ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]]; then
    sudo=()
    [[ "$(id -u)" == 0 ]] || sudo=(sudo -n)
    "${sudo[@]}" apt-get install -y -q faketime >/dev/null 2>&1 \
        || { "${sudo[@]}" apt-get update -q >/dev/null && "${sudo[@]}" apt-get install -y -q faketime >/dev/null; }
fi
ls /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1

section "promtool (Debian's prometheus package, unpacked into target/) for the metrics lints"
# The core's and the Python module's metrics tests run `promtool check metrics` when promtool
# is on PATH, and say SKIPPED otherwise.
promtool="$(./scripts/promtool.sh)"
if [[ -n "$promtool" ]]; then
    PATH="$(dirname "$promtool"):$PATH"
    export PATH
    "$promtool" --version | head -n 1
fi

section "rust: formatting"
cargo fmt --all --check

section "rust: clippy"
cargo clippy --workspace --all-targets -- -D warnings

# The core's documentation is the map of where each rule lives: a broken link there is a
# newcomer sent nowhere, so it fails like a lint.
section "rust: the core's documentation, private items included"
RUSTDOCFLAGS="-D warnings" cargo doc -p gotry-tenant-state --no-deps --document-private-items

section "rust: tests (core, C ABI crate, CLI, harness, bindings' Rust parts)"
cargo test --workspace

section "C and C++ over the C ABI"
GOTRY_S3_URL="$(s3_url c)" tests/c/run.sh

section "Node.js addon"
GOTRY_S3_URL="$(s3_url node)" bindings-node/run-tests.sh

section "Python module"
GOTRY_S3_URL="$(s3_url python)" bindings-python/run-tests.sh

section "cross-language contention and crash runs"
tests/cross/run.sh

section "release artefacts: package, then install and use them with no Rust toolchain"
tests/packages/run.sh

printf '\n%d passed, 0 failed\n' "$sections"
