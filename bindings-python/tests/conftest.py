"""Shared fixtures: a store on a fresh file whose clock moves only when a test says so, a
tenant's ledger, and the helpers of the tests that run threads: waiting for a condition,
catching what reaches ``sys.unraisablehook``."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

import gotry_tenant_state as gts

START_MS = 1_700_000_000_000
LEDGER = Path("gotry-state") / "gotry-state.db"


@pytest.fixture
def clock() -> gts.ManualClock:
    return gts.ManualClock(START_MS)


@pytest.fixture
def store(tmp_path: Path, clock: gts.ManualClock) -> Iterator[gts.SqliteLeaseStore]:
    with gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=clock) as opened:
        yield opened


def append_entry(root: Path | str, text: str) -> None:
    """Appends `text` to the ledger in the tenant root `root`, creating it if needed. The
    connection is closed again: a file this process still has open is copied only through a
    snapshot."""
    ledger = Path(root) / LEDGER
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(ledger)) as db, db:
        db.execute("CREATE TABLE IF NOT EXISTS entries (text TEXT NOT NULL)")
        db.execute("INSERT INTO entries (text) VALUES (?)", (text,))


# Another process that takes SQLite's write lock with the standard library's sqlite3 (a
# different SQLite build from the module's, in a different process: exactly a sibling
# replica). It reports the monotonic time (one clock for every process of the host) at which
# it has the lock, and the time just before it lets go: nobody else can have had the lock
# before that second reading.
_LOCK_HOLDER = """
import sqlite3, sys, time
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
print("locked", time.monotonic(), flush=True)
time.sleep(float(sys.argv[2]))
print("releasing", time.monotonic(), flush=True)
connection.execute("COMMIT")
"""


class LockHolder:
    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.locked_at = self._expect("locked")

    def _expect(self, word: str) -> float:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        assert line and line[0] == word, f"the lock holder said {line!r}"
        return float(line[1])

    def wait_released(self) -> float:
        """Waits for the holder to finish; returns the time just before it let go."""
        releasing_at = self._expect("releasing")
        assert self.process.wait() == 0
        return releasing_at


@contextmanager
def write_lock_held(path: Path, seconds: float) -> Iterator[LockHolder]:
    """Holds the write lock of the SQLite file at `path` for `seconds` in another process."""
    process = subprocess.Popen(
        [sys.executable, "-c", _LOCK_HOLDER, str(path), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield LockHolder(process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


class Ticker:
    """A thread that counts while it gets to run."""

    def __init__(self) -> None:
        self.ticks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.ticks += 1
            time.sleep(0.001)

    def __enter__(self) -> Ticker:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def wait_for(what: str, done: Callable[[], bool], seconds: float = 15.0) -> None:
    """Polls ``done`` until it holds."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.005)


class Unraisable:
    """``sys.unraisablehook`` for a test: what reached it, as (type, message), from any thread."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.seen: list[tuple[type[BaseException] | None, str]] = []

    def __call__(self, arguments: Any) -> None:
        with self.lock:
            self.seen.append((arguments.exc_type, str(arguments.exc_value)))
            self.lock.notify_all()

    def until(self, count: int) -> None:
        """Returns once ``count`` reports reached the hook (bounded, so that a test that would
        hang fails instead)."""
        with self.lock:
            came = self.lock.wait_for(lambda: len(self.seen) >= count, timeout=30)
        assert came, f"{len(self.seen)} of {count} reports reached the hook within 30 s"


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> Unraisable:
    caught = Unraisable()
    monkeypatch.setattr(sys, "unraisablehook", caught)
    return caught
