#!/usr/bin/env bash
# Makes sure the PostgreSQL server that the PostgreSQL lease store tests use answers on
# 127.0.0.1:5432 (user postgres, trust authentication, database `test`): starts the local
# cluster with Debian's pg_ctlcluster when it is installed but stopped, waits until it
# answers, and creates the `test` database when it is missing. Exits non-zero with the
# reason when there is no server, so that those tests fail loudly instead of not running.
#
#   GOTRY_SKIP_POSTGRES=1   skip the tests that need a server (this script then does nothing)
#   GOTRY_POSTGRES_URL=...  the tests use that server instead; this script leaves it alone
set -euo pipefail

say() { printf 'postgres.sh: %s\n' "$*" >&2; }

if [[ "${GOTRY_SKIP_POSTGRES:-}" == 1 ]]; then
    say "GOTRY_SKIP_POSTGRES=1: the tests that need a PostgreSQL server are SKIPPED"
    exit 0
fi
if [[ -n "${GOTRY_POSTGRES_URL:-}" ]]; then
    say "GOTRY_POSTGRES_URL is set: the tests use that server, nothing to start here"
    exit 0
fi
if ! command -v pg_isready >/dev/null || ! command -v psql >/dev/null; then
    say "no pg_isready/psql (package postgresql-client) to reach a server with; install postgresql," \
        "or set GOTRY_SKIP_POSTGRES=1 to skip the tests that need one"
    exit 1
fi
answers() { pg_isready -q -h 127.0.0.1 -p 5432 -t 2; }

if ! answers; then
    if ! command -v pg_lsclusters >/dev/null; then
        say "nothing answers on 127.0.0.1:5432 and no Debian PostgreSQL cluster tools are installed;" \
            "install postgresql, or set GOTRY_SKIP_POSTGRES=1 to skip the tests that need one"
        exit 1
    fi
    # The cluster on port 5432: version and name.
    read -r version cluster < <(pg_lsclusters --no-header | awk '$3 == 5432 { print $1, $2; exit }') || true
    if [[ -z "${version:-}" ]]; then
        say "nothing answers on 127.0.0.1:5432 and no cluster is set up on that port" \
            "(pg_lsclusters); create one (pg_createcluster), or set GOTRY_SKIP_POSTGRES=1"
        exit 1
    fi
    if [[ "$(id -u)" != 0 ]]; then
        say "nothing answers on 127.0.0.1:5432 and starting cluster $version/$cluster needs root;" \
            "start it (sudo pg_ctlcluster $version $cluster start), or set GOTRY_SKIP_POSTGRES=1"
        exit 1
    fi
    say "starting PostgreSQL cluster $version/$cluster"
    pg_ctlcluster "$version" "$cluster" start || true
    for _ in $(seq 120); do
        answers && break
        sleep 0.5
    done
    if ! answers; then
        say "cluster $version/$cluster did not answer on 127.0.0.1:5432 within a minute; the end of its log:"
        tail -n 20 "/var/log/postgresql/postgresql-$version-$cluster.log" >&2 2>/dev/null || true
        exit 1
    fi
fi

psql_as_postgres() { psql -X -q -h 127.0.0.1 -p 5432 -U postgres -d postgres -v ON_ERROR_STOP=1 "$@"; }
if ! psql_as_postgres -tAc 'SELECT 1' >/dev/null 2>&1; then
    say "the server on 127.0.0.1:5432 answers but does not let user postgres in without a password" \
        "(the tests expect trust authentication from 127.0.0.1); set GOTRY_POSTGRES_URL, or GOTRY_SKIP_POSTGRES=1"
    exit 1
fi
if [[ "$(psql_as_postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'")" != 1 ]]; then
    say "creating database test"
    psql_as_postgres -c 'CREATE DATABASE test'
fi
say "the server on 127.0.0.1:5432 answers, database test is there"
