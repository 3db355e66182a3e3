#!/usr/bin/env bash
# The Python module's whole test run, from a fresh clone: a virtual environment of its own,
# maturin, pytest, mypy and prometheus_client from PyPI, the module installed with `pip install ./bindings-python`
# (maturin as the PEP 517 backend, building into the workspace's shared target directory),
# then pytest, `mypy --strict` over the tests, the example and the benchmark, `mypy.stubtest`
# of `_native.pyi` against the module just installed, and the example itself. Exits non-zero
# on the first failure.
#
# GOTRY_PYTHON picks the interpreter (python3 by default); GOTRY_PY_VENV the environment
# (target/venv-python by default, beside the Rust build output and ignored by git).
# tests/test_mysql.py needs a MySQL/MariaDB server: GOTRY_MYSQL_URL, or the local one, which
# scripts/mariadb.sh starts when it is installed but stopped. Without a server the run fails;
# GOTRY_SKIP_MYSQL=1 skips those tests (pytest lists each skip).
# GOTRY_S3_URL (an s3:// URL of a running S3-compatible server, which scripts/test.sh
# provides) runs tests/test_copies.py's stale-writer scenario on S3 too; without it that run
# is skipped, and pytest names the skip with its reason (`-rsfE`: skips, failures, errors).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
venv="${GOTRY_PY_VENV:-$root/target/venv-python}"

step() { printf '\n---- python: %s ----\n' "$*"; }

step "virtual environment $venv"
if [[ ! -x "$venv/bin/python" ]]; then
    "${GOTRY_PYTHON:-python3}" -m venv "$venv"
fi
# The PEP 517 backend runs `maturin` from PATH, so the environment's bin comes first.
export PATH="$venv/bin:$PATH"
export VIRTUAL_ENV="$venv"
# mypy 1.18 is the first whose stubtest checks `@disjoint_base`, which the stub uses.
# prometheus_client: tests/test_metrics.py serves our families from its registry and reads
# them back with its parser.
python -m pip install --quiet "maturin>=1.16,<2" "pytest>=8" "mypy>=1.18" "prometheus_client>=0.20"

step "promtool (Debian's prometheus package) for the metrics lint"
# tests/test_metrics.py pipes the text, per-tenant series included, through
# `promtool check metrics` when promtool is on PATH, and names its skip otherwise.
if promtool="$("$root/scripts/promtool.sh")" && [[ -n "$promtool" ]]; then
    PATH="$(dirname "$promtool"):$PATH"
    export PATH
    echo "$promtool"
fi

step "MySQL/MariaDB server"
"$root/scripts/mariadb.sh"
"$root/scripts/postgres.sh"

step "pip install ./bindings-python"
# No build isolation: the maturin just installed builds it, so a run needs no second
# download, and cargo reuses the workspace's target directory.
(cd "$root" && python -m pip install --quiet --no-build-isolation --force-reinstall --no-deps ./bindings-python)

step "pytest"
# `-r` given here replaces pyproject's `-ra`; `s` keeps every skip named with its reason.
(cd "$here" && python -m pytest -q -rsfE tests)

step "mypy --strict"
(cd "$here" && python -m mypy --strict tests examples bench)

step "stubtest: _native.pyi against the installed module"
# mypy --strict trusts the hand-written stub; only the compiled module can say whether the stub
# tells the truth (a parameter renamed or a default changed in Rust). Any mismatch fails the
# run: nothing is allowlisted.
(cd "$here" && python -m mypy.stubtest gotry_tenant_state._native)

step "example: a two-replica handoff"
(cd "$here" && python examples/handoff.py)
