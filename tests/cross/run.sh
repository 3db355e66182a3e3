#!/usr/bin/env bash
# One behaviour in every language, proven across processes.
#
# 1. Contention: Rust, Node, Python and C workers (two of each) share one SQLite file and
#    several keys, acquiring, renewing, releasing and forgetting at random; lease-audit then
#    proves the lease rules from the store's log and the workers' acknowledgements.
# 2. Negative controls: the same auditor must find the violations of a split brain (two
#    files, one set of keys) and of a store that skipped the expiry check once.
# 3. Crashes: workers of every language killed with SIGKILL at random moments (at least 30
#    kills), then restarted on the same file; the audit must still pass.
# 4. MariaDB: Rust, Node and Python workers share one MySQL/MariaDB table prefix;
#    skipped, and said so, when GOTRY_SKIP_MYSQL=1.
#
# Run after bindings-node/run-tests.sh and bindings-python/run-tests.sh (scripts/test.sh
# does): it uses the addon and the virtual environment they build.
#   GOTRY_CROSS_SECONDS  length of the contention run (default 6)
#   GOTRY_CROSS_KILLS    number of SIGKILLs in the crash run (default 32)
#   GOTRY_MYSQL_URL      the MySQL/MariaDB server (default mysql://root@127.0.0.1:3306/test)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
ttl=200
seconds=${GOTRY_CROSS_SECONDS:-6}
kills_wanted=${GOTRY_CROSS_KILLS:-32}
python=${GOTRY_PY_VENV:-$root/target/venv-python}/bin/python

work=$(mktemp -d)
trap 'jobs -p | xargs -r kill -9 2>/dev/null || true; rm -rf "$work"' EXIT

[[ -x $python ]] && "$python" -c 'import gotry_tenant_state' ||
    { echo "cross: the Python module is not installed; run bindings-python/run-tests.sh first" >&2; exit 1; }
[[ -f bindings-node/gotry-tenant-state.node ]] ||
    { echo "cross: the Node addon is not built; run bindings-node/run-tests.sh first" >&2; exit 1; }

cargo build -q -p gotry-tenant-harness -p gotry-tenant-state-ffi
gcc -std=c11 -O1 -Wall -Wextra -Werror -Iinclude tests/c/contend.c -Ltarget/debug -lgotry_tenant_state \
    -Wl,-rpath,"$root/target/debug" -o "$work/contend"

# worker LANG STORE OWNER MILLISECONDS SEED ACKFILE: starts one worker in the background.
worker() {
    local lang=$1 store=$2 owner=$3 ms=$4 seed=$5 acks=$6
    : >"$acks"
    local common=(--store "$store" --owner "$owner" --keys 6 --ttl-ms "$ttl" --duration-ms "$ms" --acks "$acks" --seed "$seed")
    # exec: the background job IS the worker, so $! is the process a SIGKILL must hit.
    case $lang in
    rust) exec target/debug/lease-worker "${common[@]}" ;;
    python) exec "$python" tests/cross/worker.py "${common[@]}" ;;
    node) exec node tests/cross/worker.mjs "${common[@]}" ;;
    c) exec "$work/contend" "$store" "$owner" "$(awk "BEGIN{print $ms/1000}")" "$seed" "$ttl" "$acks" >/dev/null ;;
    esac &
}

audit() { # audit STORE ACKFILE...: runs lease-audit, echoes its output, returns its status
    local status=0
    target/debug/lease-audit --store "$1" --ttl-ms "$ttl" "${@:2}" >"$work/audit.out" || status=$?
    cat "$work/audit.out"
    return $status
}

echo "---- contention: 8 processes (2 each of rust, node, python, c), ${seconds} s"
store=$work/contention.db
target/debug/lease-worker --store "$store" --owner init --keys 1 --ttl-ms "$ttl" --duration-ms 0 --acks /dev/null
pids=()
n=0
for lang in rust node python c; do
    for i in 1 2; do
        n=$((n + 1))
        worker "$lang" "$store" "$lang-$i" $((seconds * 1000)) "$n" "$work/contention-$lang-$i.jsonl"
        pids+=($!)
    done
done
for pid in "${pids[@]}"; do wait "$pid"; done
audit "$store" "$work"/contention-*.jsonl
grep -q ' violations=0$' "$work/audit.out"
acked=$(cat "$work"/contention-*.jsonl | wc -l)
for lang in rust node python c; do
    count=$(cat "$work"/contention-"$lang"-*.jsonl | wc -l)
    echo "acknowledged to $lang workers: $count"
    [[ $count -gt 0 ]] || { echo "cross: the $lang workers were acknowledged nothing" >&2; exit 1; }
done
echo "contention: processes=8 acknowledged=$acked violations=0"

echo "---- negative control: a split brain (two files, one set of keys) must be caught"
for i in 1 2; do
    worker rust "$work/brain-a.db" "a-$i" 1500 "$((20 + i))" "$work/brain-a-$i.jsonl"
    worker python "$work/brain-b.db" "b-$i" 1500 "$((30 + i))" "$work/brain-b-$i.jsonl"
done
wait
if audit "$work/brain-a.db" "$work"/brain-*.jsonl; then
    echo "cross: the auditor missed a split brain" >&2
    exit 1
fi
grep -q 'missing from the log' "$work/audit.out"

echo "---- negative control: one acquire granted over an unexpired lease must be caught"
cp "$store" "$work/forged.db"
"$python" - "$work/forged.db" "$ttl" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
ttl = int(sys.argv[2])
key, at = db.execute("SELECT key, MAX(at_ms) FROM lease_log GROUP BY key ORDER BY 2 DESC LIMIT 1").fetchone()
at += 1
epoch, until = db.execute("SELECT epoch, lease_until_ms FROM leases WHERE key = ?", (key,)).fetchone()
# What a store that forgot its expiry check would write: the triggers allow it.
db.execute("BEGIN IMMEDIATE")
if until <= at:
    # The workers may have released this key last; a rightful holder takes it first, so the
    # intruder's grant below always lands on an unexpired lease.
    epoch += 1
    db.execute("UPDATE leases SET owner = 'rightful', epoch = ?, lease_until_ms = ? WHERE key = ?", (epoch, at + ttl, key))
    db.execute("INSERT INTO lease_log (key, op, owner, epoch, at_ms) VALUES (?, 'acquire', 'rightful', ?, ?)", (key, epoch, at))
    at += 1
db.execute("UPDATE leases SET owner = 'intruder', epoch = ?, lease_until_ms = ? WHERE key = ?", (epoch + 1, at + ttl, key))
db.execute("INSERT INTO lease_log (key, op, owner, epoch, at_ms) VALUES (?, 'acquire', 'intruder', ?, ?)", (key, epoch + 1, at))
db.execute("COMMIT")
PY
if audit "$work/forged.db" "$work"/contention-*.jsonl; then
    echo "cross: the auditor missed an acquire over an unexpired lease" >&2
    exit 1
fi
grep -q 'unexpired' "$work/audit.out"
echo "negative controls: both caught"

echo "---- crashes: workers killed with SIGKILL at random moments, then restarted"
store=$work/crash.db
target/debug/lease-worker --store "$store" --owner init --keys 1 --ttl-ms "$ttl" --duration-ms 0 --acks /dev/null
langs=(rust node python c)
kills=0
round=0
while [[ $kills -lt $kills_wanted ]]; do
    pids=()
    for slot in 0 1 2 3; do
        round=$((round + 1))
        lang=${langs[$(((round + slot) % 4))]}
        worker "$lang" "$store" "$lang-crash-$round" 60000 "$((1000 + round))" "$work/crash-$round.jsonl"
        pids+=($!)
    done
    sleep "0.$((RANDOM % 5 + 3))"
    for pid in "${pids[@]}"; do
        kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
    done
    wait 2>/dev/null || true
done
echo "killed $kills workers"
pids=()
for lang in rust node python c; do
    worker "$lang" "$store" "$lang-after" 1500 "$((round + 7))" "$work/crash-after-$lang.jsonl"
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
for lang in rust node python c; do
    [[ -s $work/crash-after-$lang.jsonl ]] || { echo "cross: the restarted $lang worker was acknowledged nothing" >&2; exit 1; }
done
audit "$store" "$work"/crash-*.jsonl
grep -q ' violations=0$' "$work/audit.out"
grep -q 'integrity=ok' "$work/audit.out"
echo "crashes: kills=$kills acknowledged=$(cat "$work"/crash-*.jsonl | wc -l) violations=0"

echo "---- MariaDB: rust, node and python workers share one table prefix"
if [[ ${GOTRY_SKIP_MYSQL:-} == 1 ]]; then
    echo "SKIPPED: the MariaDB contention run (GOTRY_SKIP_MYSQL=1)"
    exit 0
fi
base=${GOTRY_MYSQL_URL:-mysql://root@127.0.0.1:3306/test}
store="$base?prefix=cross_$(date +%s)_$$_"
pids=()
for lang in rust node python; do
    for i in 1 2; do
        worker "$lang" "$store" "$lang-my-$i" 4000 "$((50 + i))" "$work/mysql-$lang-$i.jsonl"
        pids+=($!)
    done
done
for pid in "${pids[@]}"; do wait "$pid"; done
# The TTL of 200 ms is for the run only: a production MySQL store wants 10 s or more.
audit "$store" "$work"/mysql-*.jsonl
grep -q ' violations=0$' "$work/audit.out"
for lang in rust node python; do
    count=$(cat "$work"/mysql-"$lang"-*.jsonl | wc -l)
    echo "acknowledged to $lang workers on MariaDB: $count"
    [[ $count -gt 0 ]] || { echo "cross: the $lang workers were acknowledged nothing on MariaDB" >&2; exit 1; }
done
echo "mariadb: processes=6 acknowledged=$(cat "$work"/mysql-*.jsonl | wc -l) violations=0"
