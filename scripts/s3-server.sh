#!/usr/bin/env bash
# Prints the path of a moto_server executable (an S3 emulator) for the S3 durable store
# tests, installing moto into target/venv-s3 the first time. The tests start their own
# servers from it (GOTRY_MOTO_SERVER=<path>), each memory-only on a free port, so nothing
# here is left running. Installing needs the Python package registry once; later runs only
# check the installed version.
#
#   GOTRY_SKIP_S3=1   the tests that need a server are skipped (this script then prints nothing)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 's3-server.sh: %s\n' "$*" >&2; }

if [[ "${GOTRY_SKIP_S3:-}" == 1 ]]; then
    say "GOTRY_SKIP_S3=1: the tests that need an S3 server are SKIPPED"
    exit 0
fi

venv=target/venv-s3
moto_version=5.2.5
server="$PWD/$venv/bin/moto_server"

installed() {
    [[ -x "$server" ]] &&
        [[ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("moto"))' 2>/dev/null)" == "$moto_version" ]] &&
        "$venv/bin/python" -c 'import flask, flask_cors' 2>/dev/null
}

if ! installed; then
    say "installing moto $moto_version into $venv"
    [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "moto[s3]==$moto_version" flask flask-cors >&2
    installed || { say "moto $moto_version is still not usable in $venv"; exit 1; }
fi
printf '%s\n' "$server"
