#!/usr/bin/env bash
# Starts a second, throwaway PostgreSQL server for the TLS tests of the PostgreSQL lease
# store, and prints on stdout the shell lines that point the tests at it:
#
#   eval "$(scripts/postgres-tls.sh [--watch PID] || echo 'exit 1')"
#   scripts/postgres-tls.sh --stop
#
# The server: the installed PostgreSQL (14 or later, as the store needs), on 127.0.0.1 and a
# free port, with a fresh cluster and log under target/postgres-tls/ and no Unix socket. A
# CA and a server certificate (CN localhost, SAN DNS:localhost and IP:127.0.0.1, EC P-256)
# are generated with openssl on every run, and a second CA that signed nothing (the "wrong
# CA" of the tests). Its pg_hba.conf has only a `hostssl` line, so a plain TCP connection
# is refused; the one role it admits has a password of this run's own (scram-sha-256) and
# owns the database `test`, without being a superuser, as a deployment's store user is not.
#
# Printed (as `export` lines):
#   GOTRY_POSTGRES_TLS_URL       postgres://gotry_tls:<password>@127.0.0.1:<port>/test
#   GOTRY_POSTGRES_TLS_CA        the CA that signed the server's certificate (PEM)
#   GOTRY_POSTGRES_TLS_OTHER_CA  an unrelated CA (PEM)
#
# PostgreSQL refuses to run as root: run as root, the script runs initdb and the server as
# the `postgres` user (made by every Debian/Ubuntu server package), which then owns
# target/postgres-tls/ and must be able to reach it.
#
# Re-running stops the server of the previous run (only if it is still the postgres of that
# data directory) and starts a fresh one. `--watch PID` stops the server once process PID
# has exited (scripts/test.sh passes its own pid); without it the server runs until
# `--stop` or the next run. About 1 s on an idle machine (initdb is most of it), 3 s beside
# a build.
#
#   GOTRY_SKIP_POSTGRES=1       skip the tests that need a PostgreSQL server (prints nothing)
#   GOTRY_POSTGRES_TLS_URL=...  the tests use that server; nothing is started here
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'postgres-tls.sh: %s\n' "$*" >&2; }
die() {
    say "$@"
    exit 1
}

dir="$PWD/target/postgres-tls"
data="$dir/data"
pid_file="$data/postmaster.pid"
watch_pid_file="$dir/watcher.pid"

# The pid in $1 when it is alive and is the postgres of this data directory: the pid file
# of an earlier run may name a process that has since become something else.
our_server() {
    local pid="$1"
    [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "-D $data "
}

stop_previous() {
    if [[ -s "$watch_pid_file" ]]; then
        local watcher
        watcher="$(cat "$watch_pid_file")"
        if [[ -r "/proc/$watcher/cmdline" ]] && tr '\0' ' ' <"/proc/$watcher/cmdline" | grep -q "postgres-tls-watch"; then
            kill "$watcher" 2>/dev/null || true
        fi
        rm -f "$watch_pid_file"
    fi
    [[ -s "$pid_file" ]] || return 0
    local pid
    pid="$(head -n 1 "$pid_file")"
    if our_server "$pid"; then
        say "stopping the server of the previous run (pid $pid)"
        # SIGINT is the fast shutdown: SIGTERM would wait for every client to leave.
        kill -INT "$pid" 2>/dev/null || true
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

if [[ "${GOTRY_SKIP_POSTGRES:-}" == 1 ]]; then
    say "GOTRY_SKIP_POSTGRES=1: the TLS tests of the PostgreSQL store are SKIPPED, no server started"
    exit 0
fi
if [[ -n "${GOTRY_POSTGRES_TLS_URL:-}" ]]; then
    say "GOTRY_POSTGRES_TLS_URL is set: the TLS tests use that server, nothing to start here"
    exit 0
fi

started_at=$(date +%s.%N)
# Debian keeps the server programs out of PATH, one folder per major version: the newest.
bin=""
for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) \
    "$(dirname "$(command -v initdb || echo /nonexistent/initdb)")"; do
    if [[ -x "$candidate/initdb" && -x "$candidate/postgres" && -x "$candidate/psql" ]]; then
        bin="$candidate"
        break
    fi
done
[[ -n "$bin" ]] || die "no PostgreSQL server programs (initdb, postgres, psql) are installed; install" \
    "postgresql, or set GOTRY_SKIP_POSTGRES=1 to skip the tests that need one"
version="$("$bin/postgres" --version | sed -E 's/^[^0-9]*([0-9]+).*/\1/')"
[[ "$version" =~ ^[0-9]+$ && "$version" -ge 14 ]] || die "the store needs PostgreSQL 14 or later; $bin has $version"
command -v openssl >/dev/null || die "no openssl to make the certificates with"
command -v python3 >/dev/null || die "no python3 to pick a free port and hash the password with"

as_server=()
if [[ "$(id -u)" == 0 ]]; then
    id postgres >/dev/null 2>&1 || die "running as root, and there is no postgres user to run the server as" \
        "(PostgreSQL refuses root); run as another user, or create one"
    command -v setpriv >/dev/null || die "running as root, and no setpriv (util-linux) to drop to the postgres user with"
    # setpriv execs in place (runuser and su fork), so the pid of a background job is the server's.
    as_server=(setpriv --reuid=postgres --regid=postgres --init-groups --)
fi

stop_previous
rm -rf "$dir"
mkdir -p "$dir"

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
# The server refuses a key that others may read.
chmod 600 "$dir/server.key"
if [[ ${#as_server[@]} != 0 ]]; then
    chown -R postgres: "$dir"
    "${as_server[@]}" test -w "$dir" || die "the postgres user cannot reach $dir (a folder above it is" \
        "closed to it); run from a checkout it can reach, or as a user other than root"
fi

# ---- cluster ----------------------------------------------------------------------------
# --no-sync: a cluster that is thrown away with the run need not survive a crash of initdb.
# The C locale, since initdb fails on a LANG whose locale is not installed.
"${as_server[@]}" "$bin/initdb" -D "$data" --encoding=UTF8 --locale=C --no-sync --no-instructions \
    >"$dir/initdb.log" 2>&1 \
    || die "initdb failed; the end of $dir/initdb.log:" "$(tail -n 20 "$dir/initdb.log")"

password="tls-$(openssl rand -hex 12)"
# The server is given the SCRAM verifier, never the password, so that no log of the
# server's (an error quotes its statement) can hold it.
verifier="$(printf '%s' "$password" | python3 -c '
import base64, hashlib, hmac, os, sys
password, salt, rounds = sys.stdin.buffer.read(), os.urandom(16), 4096
salted = hashlib.pbkdf2_hmac("sha256", password, salt, rounds)
stored = hashlib.sha256(hmac.new(salted, b"Client Key", "sha256").digest()).digest()
server = hmac.new(salted, b"Server Key", "sha256").digest()
b64 = lambda raw: base64.b64encode(raw).decode()
print(f"SCRAM-SHA-256${rounds}:{b64(salt)}${b64(stored)}:{b64(server)}")
')"
# Single-user mode reads one statement a line; it needs no connection, so no pg_hba line
# for a superuser is ever opened. Its closing checkpoint unsynced, as initdb's above.
"${as_server[@]}" "$bin/postgres" --single -D "$data" -c fsync=off postgres >"$dir/bootstrap.log" 2>&1 <<SQL \
    || die "making the role and database failed; the end of $dir/bootstrap.log:" "$(tail -n 20 "$dir/bootstrap.log")"
CREATE ROLE gotry_tls LOGIN PASSWORD '$verifier'
CREATE DATABASE test OWNER gotry_tls
SQL
! grep -q "ERROR" "$dir/bootstrap.log" \
    || die "making the role and database failed; the end of $dir/bootstrap.log:" "$(tail -n 20 "$dir/bootstrap.log")"

cat >"$data/pg_hba.conf" <<'HBA'
# TLS only, from the one address the server listens on: a plain connection matches no line.
hostssl test gotry_tls 127.0.0.1/32 scram-sha-256
HBA

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

psql_as() {
    local mode="$1"
    shift
    PGPASSWORD="$password" "$bin/psql" -X -w -tA \
        "host=127.0.0.1 port=$port dbname=test user=gotry_tls sslmode=$mode connect_timeout=2 $*" \
        -c "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
}

# Another process may take the free port between the probe and the bind: try a few.
port=""
for try in 1 2 3; do
    port="$(free_port)"
    cat >"$data/postgresql.auto.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = ''
ssl = on
ssl_cert_file = '$dir/server.pem'
ssl_key_file = '$dir/server.key'
shared_buffers = 16MB
CONF
    [[ ${#as_server[@]} == 0 ]] || chown postgres: "$data/postgresql.auto.conf"
    # The cluster name tells this server's processes from the local cluster's in ps.
    setsid "${as_server[@]}" "$bin/postgres" -D "$data" -c "cluster_name=gotry-tls" \
        </dev/null >>"$dir/server.log" 2>&1 &
    server=$!
    ready=""
    # A cold start on a busy machine can take a while: up to a minute.
    for _ in $(seq 240); do
        if ! kill -0 "$server" 2>/dev/null; then
            break
        fi
        if [[ "$(psql_as verify-full "sslrootcert=$dir/ca.pem" 2>/dev/null)" == t ]]; then
            ready=1
            break
        fi
        sleep 0.25
    done
    [[ -z "$ready" ]] || break
    if kill -0 "$server" 2>/dev/null; then
        kill -KILL "$server" 2>/dev/null || true
        die "postgres did not answer over TLS on 127.0.0.1:$port within a minute; the end of its log:" \
            "$(tail -n 20 "$dir/server.log" 2>/dev/null)"
    fi
    if ! grep -q "Address already in use" "$dir/server.log" 2>/dev/null || [[ "$try" == 3 ]]; then
        die "postgres exited at start; the end of its log:" "$(tail -n 20 "$dir/server.log" 2>/dev/null)"
    fi
    say "port $port was taken meanwhile; trying another"
done
[[ "$(head -n 1 "$pid_file" 2>/dev/null)" == "$server" ]] || say "note: pid file says $(head -n 1 "$pid_file" 2>/dev/null), started $server"
# What the tests count on: a plain connection is refused, by pg_hba.conf rather than by a
# wrong password or an unreachable port.
if plain="$(psql_as disable 2>&1)" || [[ "$plain" != *"no encryption"* ]]; then
    kill -INT "$server" 2>/dev/null || true
    die "the server took or refused a plain connection otherwise than by pg_hba.conf: $plain"
fi

if [[ -n "$watch" ]]; then
    # Detached, and with no descriptor of the caller's: a command substitution waits for
    # every writer of its pipe to close.
    watcher='while kill -0 "$1" 2>/dev/null; do sleep 2; done
        if tr "\0" " " <"/proc/$2/cmdline" 2>/dev/null | grep -qF -- "-D $3 "; then kill -INT "$2"; fi'
    setsid bash -c "$watcher" postgres-tls-watch "$watch" "$server" "$data" </dev/null >>"$dir/watcher.log" 2>&1 &
    echo $! >"$watch_pid_file"
fi

elapsed="$(awk -v a="$started_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
say "PostgreSQL $version with TLS only (hostssl) on 127.0.0.1:$port," \
    "pid $server, CA $dir/ca.pem, ready in ${elapsed} s${watch:+; stops when pid $watch exits}"
printf "export GOTRY_POSTGRES_TLS_URL='postgres://gotry_tls:%s@127.0.0.1:%s/test'\n" "$password" "$port"
printf "export GOTRY_POSTGRES_TLS_CA='%s'\n" "$dir/ca.pem"
printf "export GOTRY_POSTGRES_TLS_OTHER_CA='%s'\n" "$dir/other-ca.pem"
