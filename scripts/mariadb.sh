#!/usr/bin/env bash
# Makes sure the MySQL/MariaDB server that the MySQL lease store tests use is answering on
# 127.0.0.1:3306 (root, empty password, database `test`): starts the local MariaDB when it
# is installed but stopped, and waits until it answers. Exits non-zero with the reason when
# there is no server, so that those tests fail loudly instead of not running.
#
#   GOTRY_SKIP_MYSQL=1   skip the tests that need a server (this script then does nothing)
#   GOTRY_MYSQL_URL=...  the tests use that server instead; this script leaves it alone
set -euo pipefail

say() { printf 'mariadb.sh: %s\n' "$*" >&2; }

if [[ "${GOTRY_SKIP_MYSQL:-}" == 1 ]]; then
    say "GOTRY_SKIP_MYSQL=1: the tests that need a MySQL/MariaDB server are SKIPPED"
    exit 0
fi
if [[ -n "${GOTRY_MYSQL_URL:-}" ]]; then
    say "GOTRY_MYSQL_URL is set: the tests use that server, nothing to start here"
    exit 0
fi

answers() {
    mysqladmin --protocol=tcp --host=127.0.0.1 --port=3306 --user=root \
        --connect-timeout=2 ping >/dev/null 2>&1
}

if ! command -v mysqladmin >/dev/null; then
    say "no mysqladmin (package mariadb-client) to reach a server with; install mariadb-server," \
        "or set GOTRY_SKIP_MYSQL=1 to skip the tests that need one"
    exit 1
fi
if answers; then
    say "the server on 127.0.0.1:3306 answers"
    exit 0
fi

daemon=/usr/sbin/mariadbd
if [[ ! -x "$daemon" ]]; then
    say "nothing answers on 127.0.0.1:3306 and no MariaDB server is installed ($daemon);" \
        "install mariadb-server, or set GOTRY_SKIP_MYSQL=1 to skip the tests that need one"
    exit 1
fi
if [[ "$(id -u)" != 0 ]]; then
    say "nothing answers on 127.0.0.1:3306 and starting $daemon needs root;" \
        "start it (e.g. 'sudo service mariadb start'), or set GOTRY_SKIP_MYSQL=1"
    exit 1
fi

say "starting $daemon"
# Its socket and pid file go here; the folder lives in /run and is gone after a reboot.
if id mysql >/dev/null 2>&1; then
    install -d -o mysql -g mysql /run/mysqld
fi
start-stop-daemon --start --oknodo --background --exec "$daemon"
# A cold start with crash recovery can take a while on a busy machine: up to a minute.
for _ in $(seq 120); do
    if answers; then
        say "the server on 127.0.0.1:3306 answers"
        exit 0
    fi
    sleep 0.5
done
say "$daemon did not answer on 127.0.0.1:3306 within a minute; the end of its log:"
tail -n 20 /var/log/mysql/error.log >&2 2>/dev/null || true
exit 1
