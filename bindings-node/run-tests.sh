#!/usr/bin/env bash
# The Node.js suite of @gotry/tenant-state from a fresh clone: installs the locked npm
# packages, builds the addon (debug, in the workspace's shared target folder) and runs the
# node:test suites. Needs node >= 20, cargo and python3 (its sqlite3 module holds a write
# lock from another process in one test). Exits non-zero on any failure.
#
# test/mysql.test.js needs a MySQL/MariaDB server: GOTRY_MYSQL_URL, or the local one, which
# scripts/mariadb.sh starts when it is installed but stopped. GOTRY_SKIP_MYSQL=1 skips those
# tests (they are reported as skipped); otherwise a missing server fails the run.
# test/postgres.test.js likewise needs PostgreSQL: GOTRY_POSTGRES_URL, or the local one,
# which scripts/postgres.sh starts; GOTRY_SKIP_POSTGRES=1 skips those tests.
set -euo pipefail
cd "$(dirname "$0")"

../scripts/mariadb.sh
../scripts/postgres.sh

npm ci --no-audit --no-fund
npm test

# The build regenerates native.d.ts; the committed copy must be what the code declares.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    if ! git diff --exit-code -- native.d.ts; then
        echo "native.d.ts is out of date: run 'npm run build' in bindings-node and commit it" >&2
        exit 1
    fi
fi
