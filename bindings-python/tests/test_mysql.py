"""The MySQL/MariaDB lease store through the module: opened by URL, the lease rules on the
server's clock, batched renewals, a keeper, and the GIL released while a call waits for the
server.

The server is the one at GOTRY_MYSQL_URL, or the local one (root, no password, database
``test``) that scripts/mariadb.sh starts. Without a server these tests FAIL, saying so;
GOTRY_SKIP_MYSQL=1 skips them, and pytest lists each skip with its reason. Each run uses
tables of its own (a unique prefix), dropped afterwards when the local server is used and
the ``mysql`` client is installed.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

import gotry_tenant_state as gts
from conftest import Ticker

LOCAL_URL = "mysql://root@127.0.0.1:3306/test"
SKIP = os.environ.get("GOTRY_SKIP_MYSQL") == "1"
SKIP_REASON = "GOTRY_SKIP_MYSQL=1: the tests that need a MySQL/MariaDB server are SKIPPED"


def with_prefix(url: str, prefix: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}prefix={prefix}"


@pytest.fixture(scope="module")
def mysql_url() -> Iterator[str]:
    """The server's URL with this run's table prefix, once the server answered."""
    if SKIP:
        pytest.skip(SKIP_REASON)
    base = os.environ.get("GOTRY_MYSQL_URL") or LOCAL_URL
    prefix = f"gtpy{os.getpid()}_{secrets.token_hex(3)}_"
    url = with_prefix(base, prefix)
    try:
        gts.open_lease_store(url).close()
    except gts.LeaseStoreUnavailableError as error:
        pytest.fail(
            f"no MySQL/MariaDB server answers ({error}); start the local one with scripts/mariadb.sh, "
            "point GOTRY_MYSQL_URL at another, or set GOTRY_SKIP_MYSQL=1 to skip these tests"
        )
    yield url
    if base == LOCAL_URL and shutil.which("mysql"):
        subprocess.run(
            ["mysql", "--protocol=tcp", "-h127.0.0.1", "-P3306", "-uroot", "test", "-e",
             f"DROP TABLE IF EXISTS {prefix}leases, {prefix}lease_log, {prefix}lease_log_pruned"],
            check=True,
        )


@pytest.fixture
def store(mysql_url: str) -> Iterator[gts.LeaseStore]:
    with gts.open_lease_store(mysql_url) as opened:
        yield opened


def fresh_key(name: str) -> str:
    """Keys of their own for each test: the tables are shared by the whole module."""
    return f"{name}/{secrets.token_hex(4)}"


def test_the_lease_rules_hold_on_the_server_s_clock(store: gts.LeaseStore) -> None:
    key = fresh_key("rules")
    grant = store.acquire(key, "replica-a", 10_000)
    assert (grant.record.key, grant.record.owner, grant.record.epoch, grant.ttl_ms) == (key, "replica-a", 1, 10_000)
    with pytest.raises(gts.LeaseHeldError) as held:
        store.acquire(key, "replica-b", 10_000)
    assert held.value.code == "GOTRY_TENANT_LEASE_HELD"
    assert held.value.record == store.read(key) == grant.record
    renewed = store.renew(key, "replica-a", 1, 20_000)
    assert (renewed.record.epoch, renewed.ttl_ms) == (1, 20_000)
    released = store.release(key, "replica-a", 1)
    assert released.lease_until_ms <= store.now_ms()
    with pytest.raises(gts.LeaseLostError):
        store.renew(key, "replica-a", 1, 10_000)
    assert store.acquire(key, "replica-b", 10_000).record.epoch == 2
    history = store.history(key)
    assert [(e.op, e.owner, e.epoch) for e in history] == [
        ("acquire", "replica-a", 1),
        ("renew", "replica-a", 1),
        ("release", "replica-a", 1),
        ("acquire", "replica-b", 2),
    ]
    # Every decision was taken on the server's clock, read inside the transaction.
    assert grant.record.lease_until_ms == history[0].at_ms + 10_000
    assert renewed.record.lease_until_ms == history[1].at_ms + 20_000
    assert [record.key for record in store.list(key)] == [key]


def test_a_batch_is_answered_lease_by_lease(store: gts.LeaseStore) -> None:
    kept, taken = fresh_key("kept"), fresh_key("taken")
    store.acquire(kept, "replica-a", 10_000)
    store.acquire(taken, "replica-a", 10_000)
    store.release(taken, "replica-a", 1)
    store.acquire(taken, "replica-b", 10_000)
    answers = store.renew_batch("replica-a", 10_000, [(kept, 1), (taken, 1)])
    assert len(answers) == 2
    assert isinstance(answers[0], gts.LeaseGrant) and answers[0].record.key == kept
    assert isinstance(answers[1], gts.LeaseLostError)


def test_a_keeper_renews_and_releases_on_mysql(store: gts.LeaseStore) -> None:
    clock = gts.ManualClock(0)
    events: list[gts.KeeperEvent] = []
    keys = sorted(fresh_key("kept") for _ in range(3))
    with gts.LeaseKeeper(
        store=store,
        replica_id="replica-a",
        ttl_ms=10_000,
        margin_ms=1_000,
        renew_fraction=0.25,
        on_event=events.append,
        clock=clock,
        start_thread=False,
    ) as keeper:
        leases = [keeper.acquire(key) for key in keys]
        clock.advance(2_500)
        tick = keeper.tick()
        assert (tick.batches, tick.renewed, tick.lost, tick.failed) == (1, 3, 0, 0)
        assert all(lease.remaining_ms() == 9_000 for lease in leases)
        shutdown = keeper.shutdown()
        assert (shutdown.released, shutdown.failed, shutdown.timed_out) == (tuple(keys), (), ())
    assert events == []
    for key in keys:
        assert [entry.op for entry in store.history(key)] == ["acquire", "renew", "release"]


class HoldingRelay:
    """A TCP relay to the server that can hold back the server's next answer until told."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.hold_next = threading.Event()
        self.holding = threading.Event()
        self.let_go = threading.Event()
        self.let_go_at = 0.0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, answers: bool) -> None:
        try:
            while data := source.recv(65536):
                if answers and self.hold_next.is_set():
                    self.hold_next.clear()
                    self.holding.set()
                    self.let_go.wait()
                    self.let_go_at = time.monotonic()
                target.sendall(data)
        except OSError:
            pass
        finally:
            source.close()
            target.close()

    def close(self) -> None:
        self.listener.close()


def test_other_threads_run_while_a_call_waits_for_the_server(mysql_url: str) -> None:
    parts = urlsplit(mysql_url)
    assert parts.hostname is not None
    relay = HoldingRelay(parts.hostname, parts.port or 3306)
    credentials, at, _ = parts.netloc.rpartition("@")
    via_relay = urlunsplit(parts._replace(netloc=f"{credentials}{at}127.0.0.1:{relay.port}"))
    key = fresh_key("gil")

    def let_go_later() -> None:
        relay.holding.wait()
        # Long enough for the ticker to count, well inside the store's 2 s read timeout.
        time.sleep(0.5)
        relay.let_go.set()

    try:
        with gts.open_lease_store(via_relay) as store, Ticker() as ticker:
            releaser = threading.Thread(target=let_go_later)
            releaser.start()
            relay.hold_next.set()
            before = ticker.ticks
            store.acquire(key, "replica-a", 10_000)
            during = ticker.ticks - before
            returned_at = time.monotonic()
            releaser.join()
            assert [entry.op for entry in store.history(key)] == ["acquire"]
    finally:
        relay.close()
    # The call really waited for the held answer, and the ticker kept counting meanwhile.
    assert returned_at >= relay.let_go_at > 0
    assert during >= 10, f"the ticker ran {during} times in about half a second"


def test_credentials_never_appear_in_errors() -> None:
    # Nothing listens on port 1: the connection is refused at once, no server needed.
    with pytest.raises(gts.LeaseStoreUnavailableError) as caught:
        gts.open_lease_store("mysql://gotry:pa55-s3cret@127.0.0.1:1/test?timeout_ms=500")
    assert "pa55-s3cret" not in str(caught.value) and "pa55-s3cret" not in repr(caught.value)
    with pytest.raises(ValueError) as refused:
        gts.open_lease_store("mysql://gotry:pa55-s3cret@127.0.0.1/test?prefx=typo")
    assert "prefx" in str(refused.value) and "pa55-s3cret" not in str(refused.value)
