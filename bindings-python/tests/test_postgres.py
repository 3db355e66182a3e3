"""The PostgreSQL lease store through the module: opened by URL (``postgres://`` and
``postgresql://``), the lease rules on the server's clock, and a batch answered lease by lease.

The server is the one at GOTRY_POSTGRES_URL, or the local one (user postgres, trust
authentication, database ``test``) that scripts/postgres.sh starts. Without a server these
tests FAIL, saying so; GOTRY_SKIP_POSTGRES=1 skips them, and pytest lists each skip with its
reason. Each run uses tables of its own (a unique prefix), dropped afterwards when the local
server is used and ``psql`` is installed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator

import pytest

import gotry_tenant_state as gts

LOCAL_URL = "postgres://postgres@127.0.0.1:5432/test"
SKIP = os.environ.get("GOTRY_SKIP_POSTGRES") == "1"
SKIP_REASON = "GOTRY_SKIP_POSTGRES=1: the tests that need a PostgreSQL server are SKIPPED"


def with_prefix(url: str, prefix: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}prefix={prefix}"


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    """The server's URL with this run's table prefix, once the server answered."""
    if SKIP:
        pytest.skip(SKIP_REASON)
    base = os.environ.get("GOTRY_POSTGRES_URL") or LOCAL_URL
    prefix = f"gtpy{os.getpid()}_{secrets.token_hex(3)}_"
    url = with_prefix(base, prefix)
    try:
        gts.open_lease_store(url).close()
    except gts.LeaseStoreUnavailableError as error:
        pytest.fail(
            f"no PostgreSQL server answers ({error}); start the local one with scripts/postgres.sh, "
            "point GOTRY_POSTGRES_URL at another, or set GOTRY_SKIP_POSTGRES=1 to skip these tests"
        )
    yield url
    if base == LOCAL_URL and shutil.which("psql"):
        subprocess.run(
            ["psql", "-X", "-q", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-c",
             f"DROP TABLE IF EXISTS {prefix}leases, {prefix}lease_log, {prefix}lease_log_pruned CASCADE; "
             f"DROP FUNCTION IF EXISTS {prefix}leases_guard(), {prefix}lease_log_guard()"],
            check=True,
        )


def test_both_schemes_open_one_store_and_the_rules_hold_on_the_server_s_clock(postgres_url: str) -> None:
    key = f"rules/{secrets.token_hex(4)}"
    other_url = postgres_url.replace("postgres://", "postgresql://", 1)
    with gts.open_lease_store(postgres_url) as store, gts.open_lease_store(other_url) as other:
        grant = store.acquire(key, "replica-a", 10_000)
        assert (grant.record.epoch, grant.ttl_ms) == (1, 10_000)
        with pytest.raises(gts.LeaseHeldError) as held:
            other.acquire(key, "replica-b", 10_000)
        assert held.value.record == other.read(key) == grant.record
        answers = store.renew_batch("replica-a", 20_000, [(key, 1), (key, 2)])
        assert isinstance(answers[0], gts.LeaseGrant) and answers[0].record.epoch == 1
        assert isinstance(answers[1], gts.LeaseLostError)
        store.release(key, "replica-a", 1)
        assert other.acquire(key, "replica-b", 10_000).record.epoch == 2
        history = store.history(key)
        assert [(e.op, e.owner, e.epoch) for e in history] == [
            ("acquire", "replica-a", 1),
            ("renew", "replica-a", 1),
            ("release", "replica-a", 1),
            ("acquire", "replica-b", 2),
        ]
        assert grant.record.lease_until_ms == history[0].at_ms + 10_000


def test_an_unreachable_server_is_unavailable_without_the_credentials() -> None:
    with pytest.raises(gts.LeaseStoreUnavailableError) as refused:
        gts.open_lease_store("postgres://alice:s3cret@127.0.0.1:1/test?timeout_ms=200")
    assert "alice" not in str(refused.value) and "s3cret" not in str(refused.value)
