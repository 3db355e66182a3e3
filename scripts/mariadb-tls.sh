#!/usr/bin/env bash
# Starts a second, throwaway MariaDB server for the TLS tests of the MySQL lease store, and
# prints on stdout the shell lines that point the tests at it:
#
#   eval "$(scripts/mariadb-tls.sh [--watch PID] || echo 'exit 1')"
#   scripts/mariadb-tls.sh --stop
#
# The server: the installed mariadbd, on 127.0.0.1 and a free port, with a fresh data
# directory, socket, pid file and log under target/mariadb-tls/. A CA and a server
# certificate (CN localhost, SAN DNS:localhost and IP:127.0.0.1, EC P-256) are generated
# with openssl on every run, and a second CA that signed nothing (the "wrong CA" of the
# tests). The server runs with require_secure_transport=ON, so every TCP client must use
# TLS; a user with a password of this run's own is made for the tests.
#
# Printed (as `export` lines):
#   GOTRY_MYSQL_TLS_URL       mysql://gotry_tls:<password>@127.0.0.1:<port>/test
#   GOTRY_MYSQL_TLS_CA        the CA that signed the server's certificate (PEM)
#   GOTRY_MYSQL_TLS_OTHER_CA  an unrelated CA (PEM)
#
# Re-running stops the server of the previous run (only if it is still the mariadbd of
# that data directory) and starts a fresh one. `--watch PID` stops the server once process
# PID has exited (scripts/test.sh passes its own pid); without it the server runs until
# `--stop` or the next run. About 3 to 6 s on an idle machine (mariadb-install-db is most
# of it), 10 to 20 s on a busy one.
#
#   GOTRY_SKIP_MYSQL=1      skip the tests that need a MySQL/MariaDB server (prints nothing)
#   GOTRY_MYSQL_TLS_URL=... the tests use that server; nothing is started here
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'mariadb-tls.sh: %s\n' "$*" >&2; }
die() {
    say "$@"
    exit 1
}

dir="$PWD/target/mariadb-tls"
pid_file="$dir/mariadbd.pid"
watch_pid_file="$dir/watcher.pid"

# The pid in $1 when it is alive and is the mariadbd of this data directory: the pid file
# of an earlier run may name a process that has since become something else.
our_server() {
    local pid="$1"
    [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--datadir=$dir/data"
}

stop_previous() {
    if [[ -s "$watch_pid_file" ]]; then
        local watcher
        watcher="$(cat "$watch_pid_file")"
        if [[ -r "/proc/$watcher/cmdline" ]] && tr '\0' ' ' <"/proc/$watcher/cmdline" | grep -q "mariadb-tls-watch"; then
            kill "$watcher" 2>/dev/null || true
        fi
        rm -f "$watch_pid_file"
    fi
    [[ -s "$pid_file" ]] || return 0
    local pid
    pid="$(cat "$pid_file")"
    if our_server "$pid"; then
        say "stopping the server of the previous run (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 100); do
            our_server "$pid" || return 0
            sleep 0.2
        done
        say "pid $pid did not stop within 20 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
}

watch=""
case "${1:-}" in
    --stop)
        stop_previous
        rm -rf "$dir"
        exit 0
        ;;
    --watch)
        watch="${2:?--watch takes a pid}"
        [[ "$watch" =~ ^[0-9]+$ ]] || die "--watch takes a pid, got '$watch'"
        ;;
    "") ;;
    *) die "unknown argument '$1'; usage: $0 [--watch PID] | --stop" ;;
esac

if [[ "${GOTRY_SKIP_MYSQL:-}" == 1 ]]; then
    say "GOTRY_SKIP_MYSQL=1: the TLS tests of the MySQL store are SKIPPED, no server started"
    exit 0
fi
if [[ -n "${GOTRY_MYSQL_TLS_URL:-}" ]]; then
    say "GOTRY_MYSQL_TLS_URL is set: the TLS tests use that server, nothing to start here"
    exit 0
fi

started_at=$(date +%s.%N)
daemon=""
for candidate in /usr/sbin/mariadbd /usr/sbin/mysqld "$(command -v mariadbd || true)" "$(command -v mysqld || true)"; do
    if [[ -n "$candidate" && -x "$candidate" ]]; then
        daemon="$candidate"
        break
    fi
done
[[ -n "$daemon" ]] || die "no MariaDB server binary (mariadbd) is installed; install mariadb-server," \
    "or set GOTRY_SKIP_MYSQL=1 to skip the tests that need one"
install_db="$(command -v mariadb-install-db || command -v mysql_install_db || true)"
[[ -n "$install_db" ]] || die "no mariadb-install-db to make a data directory with (package mariadb-server)"
command -v openssl >/dev/null || die "no openssl to make the certificates with"
client="$(command -v mariadb || command -v mysql || true)"
[[ -n "$client" ]] || die "no mariadb client (package mariadb-client) to check the server with"

stop_previous
rm -rf "$dir"
mkdir -p "$dir/data" "$dir/tmp"

# ---- certificates ---------------------------------------------------------------------
certs() {
    local days=30
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -sha256 \
        -days "$days" -subj "/CN=gotry test CA $$" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$dir/ca.key" -out "$dir/ca.pem"
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -sha256 \
        -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr"
    cat >"$dir/server.ext" <<'EXT'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
EXT
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
        -days "$days" -sha256 -extfile "$dir/server.ext" -out "$dir/server.pem"
    # Unrelated: same shape, its own key, signed nothing this server shows.
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -sha256 \
        -days "$days" -subj "/CN=gotry unrelated CA $$" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -keyout "$dir/other-ca.key" -out "$dir/other-ca.pem"
    openssl verify -CAfile "$dir/ca.pem" "$dir/server.pem"
}
certs >"$dir/openssl.log" 2>&1 || die "openssl failed; see $dir/openssl.log"

# ---- data directory -------------------------------------------------------------------
as_user=()
[[ "$(id -u)" != 0 ]] || as_user=(--user=root)
"$install_db" --no-defaults "${as_user[@]}" --datadir="$dir/data" --auth-root-authentication-method=normal \
    --skip-test-db --skip-name-resolve >"$dir/install-db.log" 2>&1 \
    || die "mariadb-install-db failed; the end of $dir/install-db.log:" "$(tail -n 20 "$dir/install-db.log")"

password="tls-$(openssl rand -hex 12)"
cat >"$dir/init.sql" <<SQL
CREATE DATABASE IF NOT EXISTS test;
CREATE USER IF NOT EXISTS 'gotry_tls'@'%' IDENTIFIED BY '$password';
GRANT ALL PRIVILEGES ON test.* TO 'gotry_tls'@'%';
SQL

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

answers() {
    "$client" --no-defaults --protocol=tcp --host=127.0.0.1 --port="$port" --user=gotry_tls \
        --password="$password" --ssl --ssl-ca="$dir/ca.pem" --ssl-verify-server-cert \
        --connect-timeout=2 --batch --skip-column-names -e "SELECT @@require_secure_transport" test 2>/dev/null
}

# Another process may take the free port between the probe and the bind: try a few.
port=""
for try in 1 2 3; do
    port="$(free_port)"
    rm -f "$pid_file"
    setsid "$daemon" --no-defaults "${as_user[@]}" \
        --datadir="$dir/data" --tmpdir="$dir/tmp" --socket="$dir/mariadbd.sock" \
        --pid-file="$pid_file" --log-error="$dir/error.log" \
        --bind-address=127.0.0.1 --port="$port" --skip-name-resolve \
        --init-file="$dir/init.sql" \
        --ssl-ca="$dir/ca.pem" --ssl-cert="$dir/server.pem" --ssl-key="$dir/server.key" \
        --require-secure-transport=ON \
        --skip-log-bin --performance-schema=OFF --innodb-buffer-pool-size=32M \
        --max-connections=200 </dev/null >>"$dir/stdout.log" 2>&1 &
    server=$!
    ready=""
    # A cold start on a busy machine can take a while: up to a minute.
    for _ in $(seq 240); do
        if ! kill -0 "$server" 2>/dev/null; then
            break
        fi
        if [[ "$(answers)" == 1 ]]; then
            ready=1
            break
        fi
        sleep 0.25
    done
    [[ -z "$ready" ]] || break
    if kill -0 "$server" 2>/dev/null; then
        kill -KILL "$server" 2>/dev/null || true
        die "mariadbd did not answer over TLS on 127.0.0.1:$port within a minute; the end of its log:" \
            "$(tail -n 20 "$dir/error.log" 2>/dev/null)"
    fi
    if ! grep -q "Bind on TCP/IP port\|Address already in use" "$dir/error.log" 2>/dev/null || [[ "$try" == 3 ]]; then
        die "mariadbd exited at start; the end of its log:" "$(tail -n 20 "$dir/error.log" 2>/dev/null)"
    fi
    say "port $port was taken meanwhile; trying another"
done
# mariadbd wrote its pid file by now; it is the same process as $server (setsid does not
# fork when its caller is not a process group leader, as a background job of a script is not).
[[ "$(cat "$pid_file" 2>/dev/null)" == "$server" ]] || say "note: pid file says $(cat "$pid_file" 2>/dev/null), started $server"

if [[ -n "$watch" ]]; then
    # Detached, and with no descriptor of the caller's: a command substitution waits for
    # every writer of its pipe to close.
    watcher='while kill -0 "$1" 2>/dev/null; do sleep 2; done
        if tr "\0" " " <"/proc/$2/cmdline" 2>/dev/null | grep -q -- "--datadir=$3"; then kill -TERM "$2"; fi'
    setsid bash -c "$watcher" mariadb-tls-watch "$watch" "$server" "$dir/data" </dev/null >>"$dir/watcher.log" 2>&1 &
    echo $! >"$watch_pid_file"
fi

elapsed="$(awk -v a="$started_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
say "MariaDB with TLS (require_secure_transport=ON) on 127.0.0.1:$port," \
    "pid $server, CA $dir/ca.pem, ready in ${elapsed} s${watch:+; stops when pid $watch exits}"
printf "export GOTRY_MYSQL_TLS_URL='mysql://gotry_tls:%s@127.0.0.1:%s/test'\n" "$password" "$port"
printf "export GOTRY_MYSQL_TLS_CA='%s'\n" "$dir/ca.pem"
printf "export GOTRY_MYSQL_TLS_OTHER_CA='%s'\n" "$dir/other-ca.pem"
