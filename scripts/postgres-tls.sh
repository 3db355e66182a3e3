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

name=postgres-tls
# shellcheck source=scripts/tls-server-lib.sh
source scripts/tls-server-lib.sh

store=PostgreSQL
skip_var=GOTRY_SKIP_POSTGRES
url_var=GOTRY_POSTGRES_TLS_URL
data="$dir/data"
pid_file="$data/postmaster.pid"
server_mark="-D $data "
# SIGINT is the fast shutdown: SIGTERM would wait for every client to leave.
stop_signal=INT
daemon_name=postgres
server_log="$dir/server.log"
port_taken="Address already in use"
begin_run "$@"

# Debian keeps the server programs out of PATH, one folder per major version: the newest.
bin=""
# shellcheck disable=SC2012 # Debian's folder names, one a major version, for sort -V
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

fresh_dir
make_certs
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
# shellcheck disable=SC2016 # Python's braces and dollars
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

psql_as() {
    local mode="$1"
    shift
    PGPASSWORD="$password" "$bin/psql" -X -w -tA \
        "host=127.0.0.1 port=$port dbname=test user=gotry_tls sslmode=$mode connect_timeout=2 $*" \
        -c "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
}

answers_tls() {
    [[ "$(psql_as verify-full "sslrootcert=$dir/ca.pem" 2>/dev/null)" == t ]]
}

launch() {
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
        </dev/null >>"$server_log" 2>&1 &
}

start_server
# What the tests count on: a plain connection is refused, by pg_hba.conf rather than by a
# wrong password or an unreachable port.
if plain="$(psql_as disable 2>&1)" || [[ "$plain" != *"no encryption"* ]]; then
    kill -INT "$server" 2>/dev/null || true
    die "the server took or refused a plain connection otherwise than by pg_hba.conf: $plain"
fi

watch_server

say "PostgreSQL $version with TLS only (hostssl) on 127.0.0.1:$port," \
    "pid $server, CA $dir/ca.pem, ready in $(elapsed) s${watch:+; stops when pid $watch exits}"
printf "export GOTRY_POSTGRES_TLS_URL='postgres://gotry_tls:%s@127.0.0.1:%s/test'\n" "$password" "$port"
printf "export GOTRY_POSTGRES_TLS_CA='%s'\n" "$dir/ca.pem"
printf "export GOTRY_POSTGRES_TLS_OTHER_CA='%s'\n" "$dir/other-ca.pem"
