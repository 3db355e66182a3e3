#!/usr/bin/env bash
# The proof of the C ABI, from a fresh clone: builds the library with cargo, checks the
# committed header, compiles the C and C++ programs against it with -Wall -Wextra -Werror,
# runs them under valgrind, links one statically, checks the pkg-config file, fuzzes the id
# entry points, runs the shared vectors of tests/vectors, has two C processes contend on one
# SQLite file for the lease audit, and runs the durable copies (the stale-writer scenario,
# RESTORE_INVALID, COPY_CONFLICT, DURABLE_STORE_UNAVAILABLE) on a folder under valgrind and,
# when given one, on an S3-compatible store; a host that holds its ledger open through the
# system's SQLite (the snapshot function, OPEN_IN_PROCESS without one), linked both against
# the .so and against the .a; the tenant router (capacity, LEASE_HELD, handoff, draining,
# drain timeout, a lost lease, copies and status, close) from C and C++ under valgrind; and the
# metrics text (lease operations counted and read back, and the per-tenant series of a router
# started with options.tenant_metrics) under valgrind. The
# copies test writes its SQLite ledgers with python3's sqlite3 module; the snapshot and router
# tests link the system's libsqlite3 (Debian: libsqlite3-dev). The C example of ffi-c/README.md
# is compiled and run too, so the README cannot drift from the header.
# Prints "N passed, M failed" last and exits non-zero on any failure.
#
# Needs cargo, gcc, g++, valgrind, pkg-config, python3 and libsqlite3's header and library;
# crates come from crates.io.
# Environment (all optional):
#   GOTRY_FUZZ_SECONDS     length of the fuzz run (default 15); a longer run:
#                          GOTRY_FUZZ_SECONDS=600 tests/c/run.sh
#   GOTRY_FUZZ_SEED        seed of the fuzz run (default: from the clock; printed)
#   GOTRY_CONTEND_SECONDS  length of the contention run (default 4)
#   GOTRY_MYSQL_URL        the MySQL/MariaDB server of the store checks (default: the local
#                          one that scripts/mariadb.sh starts, mysql://root@127.0.0.1:3306/test)
#   GOTRY_SKIP_MYSQL=1     skip them, saying so; otherwise a missing server fails the run
#   GOTRY_POSTGRES_URL     the PostgreSQL server of the same checks (default: the local one
#                          that scripts/postgres.sh starts, postgres://postgres@127.0.0.1:5432/test)
#   GOTRY_SKIP_POSTGRES=1  skip those, saying so
#   GOTRY_S3_URL           an S3 durable store (s3://bucket/prefix?endpoint=...&region=...) on
#                          which the stale-writer scenario runs too; unset, that run is
#                          skipped, saying so
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
source scripts/workspace.sh
build=$root/tests/c/build
rm -rf "$build"
mkdir -p "$build"

passed=0
failed=0
check() { # check NAME COMMAND...: runs one check and counts it
    local name=$1
    shift
    printf '\n---- %s\n' "$name"
    if "$@"; then
        passed=$((passed + 1))
        printf 'ok: %s\n' "$name"
    else
        failed=$((failed + 1))
        printf 'FAILED: %s\n' "$name"
    fi
}
finish() {
    printf '\n%d passed, %d failed\n' "$passed" "$failed"
    [ "$failed" -eq 0 ]
    exit
}
# A prerequisite: when it fails, nothing after it can run.
require() {
    local before=$failed
    check "$@"
    [ "$failed" -eq "$before" ] || finish
}

tools() {
    local missing=0 tool
    for tool in cargo gcc g++ valgrind pkg-config python3; do
        command -v "$tool" >/dev/null || { echo "missing tool: $tool"; missing=1; }
    done
    [ "$missing" -eq 0 ]
}
require "tools: cargo gcc g++ valgrind pkg-config python3" tools
system_sqlite() {
    printf '#include <sqlite3.h>\nint main(void) { return sqlite3_libversion_number() < 3027000; }\n' |
        gcc -x c - -lsqlite3 -o /dev/null 2>/dev/null || { echo "no sqlite3.h or -lsqlite3 (Debian: apt-get install libsqlite3-dev)"; return 1; }
}
require "the system's SQLite (sqlite3.h, -lsqlite3) for the host of the snapshot and router tests" system_sqlite

# The header drift test and the Rust-side tests (panic boundary, status table, error fields).
require "rust: committed header matches cbindgen, unit tests" cargo test -q -p gotry-tenant-state-ffi

target=$(workspace_target_dir)
lib=$target/debug
native_libs=
build_library() {
    # One build gives the .so, the .a and (replayed by cargo when fresh) the native libraries.
    cargo rustc -p gotry-tenant-state-ffi --lib -- --print native-static-libs 2>"$build/cargo-rustc.log" ||
        { cat "$build/cargo-rustc.log"; return 1; }
    native_libs=$(sed -n 's/^note: native-static-libs: //p' "$build/cargo-rustc.log" | tail -n 1)
    echo "native libraries: $native_libs"
    [ -n "$native_libs" ] && [ -f "$lib/libgotry_tenant_state.so" ] && [ -f "$lib/libgotry_tenant_state.a" ]
}
require "build libgotry_tenant_state.so and .a" build_library

warnings=(-Wall -Wextra -Werror -Wpedantic -g -I"$root/include")
# shellcheck disable=SC2054 # -Wl,-rpath,DIR is one flag
shared=(-L"$lib" -lgotry_tenant_state -Wl,-rpath,"$lib")

header_alone() {
    # Included twice (the guard), alone, as C11 and as C++17.
    printf '#include "gotry_tenant_state.h"\n#include "gotry_tenant_state.h"\nint main(void) { return GOTRY_STATUS_OK; }\n' \
        >"$build/header_alone.c"
    gcc -std=c11 "${warnings[@]}" -c "$build/header_alone.c" -o "$build/header_alone_c.o" &&
        g++ -std=c++17 "${warnings[@]}" -x c++ -c "$build/header_alone.c" -o "$build/header_alone_cpp.o"
}
check "header compiles alone as C11 and C++17" header_alone

header_documented() {
    # Every constant, type, enum variant, struct field and function follows a doc comment.
    awk '
        /^#define GOTRY_TENANT_STATE_H$/ { next }
        /^(#define GOTRY_|typedef )/ || /^[a-z].*gotry_[a-z_]+\(/ ||
        /^    GOTRY_[A-Z_]+ = / || /^    [A-Za-z].*;$/ {
            items++
            if (previous !~ /\*\/$/) { print "undocumented: " $0; bad++ }
        }
        NF { previous = $0 }
        END { printf "%d items, %d undocumented\n", items, bad; exit (bad > 0 || items < 100) }
    ' "$root/include/gotry_tenant_state.h"
}
check "header: a doc comment on every item" header_documented

every_function_called() {
    local name missing=0 total=0
    for name in $(grep -oE '^[a-z].*gotry_[a-z_]+\(' include/gotry_tenant_state.h | grep -oE 'gotry_[a-z_]+'); do
        total=$((total + 1))
        grep -qw "$name" tests/c/ids_test.c tests/c/store_test.c tests/c/lease_test.c tests/c/vectors_test.c tests/c/fuzz_ids.c tests/c/copies_test.c \
            tests/c/snapshot_test.c tests/c/router_test.c tests/c/metrics_test.c ||
            { echo "no C program calls $name"; missing=$((missing + 1)); }
    done
    echo "$total functions, $missing never called"
    [ "$missing" -eq 0 ] && [ "$total" -gt 0 ]
}
check "header: every function is called by a C program" every_function_called

# The suites of the C API by area (ids, paths and errors; the lease store; leases and the
# keeper), each a program of its own, built as C11, as C++17 and as C11 against the .a.
api_suites=(ids store lease)
# shellcheck disable=SC2086 # $native_libs is a list of flags, split on purpose
compile_api_suites() {
    local suite
    for suite in "${api_suites[@]}"; do
        gcc -std=c11 "${warnings[@]}" -pthread "tests/c/${suite}_test.c" "${shared[@]}" -o "$build/${suite}_test_c" &&
            g++ -std=c++17 "${warnings[@]}" -pthread -x c++ "tests/c/${suite}_test.c" -x none "${shared[@]}" \
                -o "$build/${suite}_test_cpp" &&
            gcc -std=c11 "${warnings[@]}" -pthread "tests/c/${suite}_test.c" "$lib/libgotry_tenant_state.a" \
                $native_libs -o "$build/${suite}_test_static" || return 1
    done
}

# shellcheck disable=SC2086 # $native_libs is a list of flags, split on purpose
compile() {
    python3 tests/c/vectors_to_c.py "$build/vectors.inc" &&
        gcc -std=c11 "${warnings[@]}" -I"$build" tests/c/vectors_test.c "${shared[@]}" -o "$build/vectors_test" &&
        python3 tests/c/router_vectors_to_c.py "$build/router_vectors.inc" &&
        gcc -std=c11 "${warnings[@]}" -I"$build" -pthread tests/c/router_vectors_test.c "${shared[@]}" \
            -o "$build/router_vectors_test" &&
        compile_api_suites &&
        gcc -std=c11 "${warnings[@]}" -O1 tests/c/fuzz_ids.c "${shared[@]}" -o "$build/fuzz_ids" &&
        gcc -std=c11 "${warnings[@]}" -O1 tests/c/contend.c "${shared[@]}" -o "$build/contend" &&
        gcc -std=c11 "${warnings[@]}" tests/c/copies_test.c "${shared[@]}" -o "$build/copies_test" &&
        gcc -std=c11 "${warnings[@]}" tests/c/metrics_test.c "${shared[@]}" -o "$build/metrics_test" &&
        gcc -std=c11 "${warnings[@]}" -pthread tests/c/snapshot_test.c "${shared[@]}" -lsqlite3 \
            -o "$build/snapshot_test" &&
        gcc -std=c11 "${warnings[@]}" -pthread tests/c/snapshot_test.c "$lib/libgotry_tenant_state.a" $native_libs \
            -o "$build/snapshot_test_static" &&
        gcc -std=c11 "${warnings[@]}" -pthread tests/c/router_test.c "${shared[@]}" -lsqlite3 -o "$build/router_test_c" &&
        g++ -std=c++17 "${warnings[@]}" -pthread -x c++ tests/c/router_test.c -x none "${shared[@]}" -lsqlite3 \
            -o "$build/router_test_cpp"
}
require "compile the C and C++ programs (-Wall -Wextra -Werror)" compile

valgrind_run() { # valgrind_run PROGRAM ARGS...: no leak, no invalid access
    valgrind -q --leak-check=full --errors-for-leak-kinds=definite,possible \
        --suppressions="$root/tests/c/valgrind.supp" --error-exitcode=99 "$@"
}
# Each run starts from empty scratch folders: a store left by an earlier (or killed) run would
# hold leases this run expects to acquire.
rm -rf "$build/scratch"
scratch() { mkdir -p "$build/scratch/$1" && echo "$build/scratch/$1"; }

readme_example() {
    # The C block between the c-example markers of ffi-c/README.md, compiled as C11 (and as
    # C++17) with the suite's warnings and run in a scratch folder under valgrind: a README
    # that drifts from the header fails here.
    local dir
    dir=$(scratch readme-example) || return 1
    awk '
        /^<!-- c-example:.*compiles/ { marked = 1; next }
        marked && /^```c$/ { inside = 1; next }
        inside && /^```$/ { inside = 0; marked = 0; found++; next }
        inside { print }
        /^<!-- c-example: end -->$/ { marked = 0 }
        END { exit found != 1 }
    ' ffi-c/README.md >"$build/readme_example.c" || { echo "ffi-c/README.md has no single marked C example"; return 1; }
    echo "$(wc -l <"$build/readme_example.c") lines from ffi-c/README.md"
    gcc -std=c11 "${warnings[@]}" "$build/readme_example.c" "${shared[@]}" -o "$build/readme_example" &&
        g++ -std=c++17 "${warnings[@]}" -x c++ -c "$build/readme_example.c" -o "$build/readme_example_cpp.o" &&
        (cd "$dir" && valgrind_run "$build/readme_example") &&
        [ -f "$dir/gotry-leases.db" ]
}
check "the C example of ffi-c/README.md compiles (C11, C++17) against the header and runs under valgrind" readme_example

check "ids, paths and errors from C under valgrind" valgrind_run "$build/ids_test_c"
check "ids, paths and errors from C++ under valgrind" valgrind_run "$build/ids_test_cpp"
check "the lease store from C under valgrind" valgrind_run "$build/store_test_c" "$(scratch store-c)"
check "the lease store from C++ under valgrind" valgrind_run "$build/store_test_cpp" "$(scratch store-cpp)"
check "leases and the keeper from C under valgrind" valgrind_run "$build/lease_test_c" "$(scratch lease-c)"
check "leases and the keeper from C++ under valgrind" valgrind_run "$build/lease_test_cpp" "$(scratch lease-cpp)"
check "shared vectors (tests/vectors) under valgrind" valgrind_run "$build/vectors_test" "$(scratch vectors)"
check "durable copies on a folder under valgrind (stale writer, RESTORE_INVALID, COPY_CONFLICT, DURABLE_STORE_UNAVAILABLE)" \
    valgrind_run "$build/copies_test" "$(scratch copies)"
check "a host holding its ledger open (system SQLite): OPEN_IN_PROCESS without a snapshot function, WAL intact; the snapshot's copy restores the WAL-only rows; under valgrind" \
    valgrind_run "$build/snapshot_test" "$(scratch snapshot)"
# With the .a the host's sqlite3_* calls bind to the bundled SQLite (its definitions come first,
# and would win over -lsqlite3 too); the program prints which one it got and passes either way.
check "the same host linked statically against the .a (one SQLite in the process, the bundled one)" \
    "$build/snapshot_test_static" "$(scratch snapshot-static)"
shared_library_exports() {
    # The .so must not export its SQLite (a host's sqlite3_* calls would bind to it or to the
    # system's depending on the link order), nor the C API of a dependency (ffi-c/build.rs).
    local sqlite others
    sqlite=$(nm -D --defined-only "$lib/libgotry_tenant_state.so" | grep -c ' sqlite3_')
    others=$(nm -D --defined-only "$lib/libgotry_tenant_state.so" | awk '$2 ~ /^[TDBRVW]$/ && $3 !~ /^gotry_/' | wc -l)
    echo "libgotry_tenant_state.so exports $sqlite sqlite3_* symbols and $others other symbols besides gotry_*"
    [ "$sqlite" -eq 0 ] && [ "$others" -eq 0 ]
}
check "the .so exports only gotry_* symbols (no sqlite3_*: the host's SQLite stays its own)" shared_library_exports
check "the tenant router from C under valgrind (capacity, LEASE_HELD, handoff, DRAINING, DRAIN_TIMEOUT, lost, copies, status, close)" \
    valgrind_run "$build/router_test_c" "$(scratch router-c)"
check "the tenant router from C++ under valgrind" valgrind_run "$build/router_test_cpp" "$(scratch router-cpp)"
check "the shared router scenarios (tests/vectors/router-scenarios.json) under valgrind" \
    valgrind_run "$build/router_vectors_test" "$(scratch router-vectors)"
check "metrics from C under valgrind (lease operations and a router's per-tenant series read back from gotry_metrics_text)" \
    valgrind_run "$build/metrics_test" "$(scratch metrics)"
# The S3 run is held to the same leak check: valgrind.supp names the only allocations it
# adds, those of the S3 client's process-wide runtime, whose threads are alive at exit.
if [ -n "${GOTRY_S3_URL:-}" ]; then
    check "durable copies on S3 (GOTRY_S3_URL) under valgrind: the stale writer, an unreachable endpoint" \
        valgrind_run "$build/copies_test" "$(scratch copies-s3)" "$GOTRY_S3_URL"
else
    printf '\n---- SKIPPED: the stale writer on an S3 durable store (GOTRY_S3_URL is not set)\n'
fi

static_program() {
    local suite
    for suite in "${api_suites[@]}"; do
        if ldd "$build/${suite}_test_static" | grep -q gotry_tenant_state; then
            echo "the static ${suite}_test loads the shared library"
            return 1
        fi
    done
    "$build/ids_test_static" && "$build/store_test_static" "$(scratch static-store)" &&
        "$build/lease_test_static" "$(scratch static-lease)"
}
check "the C API suites (ids, store, lease) linked statically against the .a" static_program

pkg_config_file() {
    local version pc_dir=$build/pkgconfig
    version=$(workspace_version)
    mkdir -p "$pc_dir"
    sed -e "s|@PREFIX@|$root|" -e "s|@LIBDIR@|$lib|" -e "s|@INCLUDEDIR@|$root/include|" \
        -e "s|@VERSION@|$version|" ffi-c/gotry_tenant_state.pc.in >"$pc_dir/gotry_tenant_state.pc"
    local private
    private=$(PKG_CONFIG_PATH=$pc_dir pkg-config --static --libs-only-l gotry_tenant_state |
        sed 's/^-lgotry_tenant_state //; s/ *$//')
    if [ "$private" != "$native_libs" ]; then
        echo "Libs.private is '$private', cargo prints '$native_libs'"
        return 1
    fi
    local suite
    for suite in "${api_suites[@]}"; do
        # shellcheck disable=SC2046 # pkg-config output is a list of flags
        gcc -std=c11 "${warnings[@]}" -pthread "tests/c/${suite}_test.c" \
            $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs gotry_tenant_state) \
            -Wl,-rpath,"$lib" -o "$build/${suite}_test_pkgconfig" || return 1
    done
    "$build/ids_test_pkgconfig" && "$build/store_test_pkgconfig" "$(scratch pkgconfig-store)" &&
        "$build/lease_test_pkgconfig" "$(scratch pkgconfig-lease)"
}
check "pkg-config file: link line and native libraries" pkg_config_file

mysql_store() {
    local base=${GOTRY_MYSQL_URL:-mysql://root@127.0.0.1:3306/test} prefix="gttc$$_" separator='?' status=0
    [[ $base == *\?* ]] && separator='&'
    "$build/store_test_c" "$(scratch mysql)" "$base${separator}prefix=$prefix" || status=$?
    # Best effort: the store itself never drops its tables, so they are dropped beside it.
    if [ -z "${GOTRY_MYSQL_URL:-}" ] && command -v mysql >/dev/null; then
        mysql --protocol=tcp -h127.0.0.1 -uroot test \
            -e "DROP TABLE IF EXISTS ${prefix}leases, ${prefix}lease_log, ${prefix}lease_log_pruned" ||
            echo "left tables ${prefix}leases, ${prefix}lease_log and ${prefix}lease_log_pruned behind"
    fi
    return "$status"
}
if [ "${GOTRY_SKIP_MYSQL:-}" = 1 ]; then
    printf '\n---- SKIPPED: the store on MySQL/MariaDB (GOTRY_SKIP_MYSQL=1)\n'
else
    check "the store on MySQL/MariaDB by URL (GOTRY_MYSQL_URL, or the local server)" mysql_store
fi

# The same checks on PostgreSQL: every door opens it by URL, with no logic of its own.
postgres_store() {
    local base=${GOTRY_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test} prefix="gttc$$_" separator='?' status=0
    [[ $base == *\?* ]] && separator='&'
    "$build/store_test_c" "$(scratch postgres)" "$base${separator}prefix=$prefix" || status=$?
    # Best effort: the store itself never drops its tables, so they are dropped beside it.
    if [ -z "${GOTRY_POSTGRES_URL:-}" ] && command -v psql >/dev/null; then
        psql -X -q -h 127.0.0.1 -U postgres -d test -c \
            "DROP TABLE IF EXISTS ${prefix}leases, ${prefix}lease_log, ${prefix}lease_log_pruned CASCADE;
             DROP FUNCTION IF EXISTS ${prefix}leases_guard(), ${prefix}lease_log_guard()" ||
            echo "left tables ${prefix}leases, ${prefix}lease_log and ${prefix}lease_log_pruned behind"
    fi
    return "$status"
}
if [ "${GOTRY_SKIP_POSTGRES:-}" = 1 ]; then
    printf '\n---- SKIPPED: the store on PostgreSQL (GOTRY_SKIP_POSTGRES=1)\n'
else
    check "the store on PostgreSQL by URL (GOTRY_POSTGRES_URL, or the local server)" postgres_store
fi

fuzz_seed=${GOTRY_FUZZ_SEED:-$(date +%s)}
check "fuzz the id entry points for ${GOTRY_FUZZ_SECONDS:-15} s (seed $fuzz_seed)" \
    "$build/fuzz_ids" "$fuzz_seed" "${GOTRY_FUZZ_SECONDS:-15}"
check "fuzz the id entry points under valgrind for 3 s (seed $fuzz_seed)" \
    valgrind_run "$build/fuzz_ids" "$fuzz_seed" 3

contention() {
    local dir=$build/contention ttl=200 seconds=${GOTRY_CONTEND_SECONDS:-4} seed=$RANDOM
    mkdir -p "$dir"
    echo "two processes on $dir/leases.db for $seconds s, ttl $ttl ms, seeds $seed and $((seed + 1))"
    "$build/contend" "$dir/leases.db" c-1 "$seconds" "$seed" "$ttl" "$dir/c-1.jsonl" &
    local first=$!
    "$build/contend" "$dir/leases.db" c-2 "$seconds" "$((seed + 1))" "$ttl" "$dir/c-2.jsonl" &
    local second=$!
    local first_status=0 second_status=0
    wait "$first" || first_status=$?
    wait "$second" || second_status=$?
    local acknowledged handovers=0 key
    acknowledged=$(cat "$dir/c-1.jsonl" "$dir/c-2.jsonl" | wc -l)
    for key in k0 k1 k2 k3; do
        if grep -q "\"key\":\"$key\",\"op\":\"acquire\",\"owner\":\"c-1\"" "$dir/c-1.jsonl" &&
            grep -q "\"key\":\"$key\",\"op\":\"acquire\",\"owner\":\"c-2\"" "$dir/c-2.jsonl"; then
            handovers=$((handovers + 1))
        fi
    done
    local audit_output audit_status=0
    audit_output=$(cargo run -q -p gotry-tenant-harness --bin lease-audit -- \
        --store "$dir/leases.db" --ttl-ms "$ttl" "$dir/c-1.jsonl" "$dir/c-2.jsonl" 2>&1) || audit_status=$?
    printf '%s\n' "$audit_output"
    local violations
    violations=$(printf '%s\n' "$audit_output" | sed -n 's/.*violations=\([0-9][0-9]*\).*/\1/p')
    [ -n "$violations" ] || violations="unknown (lease-audit exited $audit_status)"
    echo "contention: 2 processes, $acknowledged operations acknowledged, $handovers of 4 keys acquired by both, $violations violations"
    [ "$first_status" -eq 0 ] && [ "$second_status" -eq 0 ] && [ "$audit_status" -eq 0 ] &&
        [ "$handovers" -gt 0 ]
}
check "two C processes contend on one SQLite file; lease-audit finds no violation" contention

finish
