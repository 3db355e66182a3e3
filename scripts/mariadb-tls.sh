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
#   GOTRY_MYSQL_TLS_ADMIN_SOCKET  the server's Unix socket, where root logs in without a
#                             password: for the test that changes this throwaway server's
#                             global settings (a server of the user's own has none)
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

name=mariadb-tls
# shellcheck source=scripts/tls-server-lib.sh
source scripts/tls-server-lib.sh

store=MySQL
skip_var=GOTRY_SKIP_MYSQL
url_var=GOTRY_MYSQL_TLS_URL
pid_file="$dir/mariadbd.pid"
server_mark="--datadir=$dir/data "
stop_signal=TERM
daemon_name=mariadbd
server_log="$dir/error.log"
port_taken="Bind on TCP/IP port\|Address already in use"
begin_run "$@"

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

fresh_dir
mkdir "$dir/data" "$dir/tmp"
make_certs

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

answers_tls() {
    [[ "$("$client" --no-defaults --protocol=tcp --host=127.0.0.1 --port="$port" --user=gotry_tls \
        --password="$password" --ssl --ssl-ca="$dir/ca.pem" --ssl-verify-server-cert \
        --connect-timeout=2 --batch --skip-column-names -e "SELECT @@require_secure_transport" test 2>/dev/null)" == 1 ]]
}

launch() {
    setsid "$daemon" --no-defaults "${as_user[@]}" \
        --datadir="$dir/data" --tmpdir="$dir/tmp" --socket="$dir/mariadbd.sock" \
        --pid-file="$pid_file" --log-error="$server_log" \
        --bind-address=127.0.0.1 --port="$port" --skip-name-resolve \
        --init-file="$dir/init.sql" \
        --ssl-ca="$dir/ca.pem" --ssl-cert="$dir/server.pem" --ssl-key="$dir/server.key" \
        --require-secure-transport=ON \
        --skip-log-bin --performance-schema=OFF --innodb-buffer-pool-size=32M \
        --max-connections=200 </dev/null >>"$dir/stdout.log" 2>&1 &
}

start_server
watch_server

say "MariaDB with TLS (require_secure_transport=ON) on 127.0.0.1:$port," \
    "pid $server, CA $dir/ca.pem, ready in $(elapsed) s${watch:+; stops when pid $watch exits}"
printf "export GOTRY_MYSQL_TLS_URL='mysql://gotry_tls:%s@127.0.0.1:%s/test'\n" "$password" "$port"
printf "export GOTRY_MYSQL_TLS_CA='%s'\n" "$dir/ca.pem"
printf "export GOTRY_MYSQL_TLS_OTHER_CA='%s'\n" "$dir/other-ca.pem"
printf "export GOTRY_MYSQL_TLS_ADMIN_SOCKET='%s'\n" "$dir/mariadbd.sock"
