"""The host snapshot for ledgers that Python's standard ``sqlite3`` has open."""

from __future__ import annotations

import sqlite3
import time
import urllib.parse

from ._native import _SNAPSHOT_LOCK_WAIT_S

__all__ = ["sqlite3_snapshot"]

#: How long a snapshot waits for a lock on the source: the core's rule, as its own backups wait.
_TIMEOUT_S = _SNAPSHOT_LOCK_WAIT_S


def sqlite3_snapshot(source: str, image: str) -> None:
    """Writes a transaction-consistent, self-contained image of the SQLite database
    ``source`` to ``image`` through the standard library's ``sqlite3``. Give it as
    ``snapshot=`` to ``EpochCopies`` or ``TenantRouter`` when this process keeps a tenant's
    ledger open with ``sqlite3``.

    Why it is needed: the copies refuse (``OpenInProcessError``) to open a file that another descriptor of this process has open,
    because they would read it through the module's own bundled SQLite. POSIX locks belong to
    the process, so when that second SQLite closed its connection it would drop the locks of
    the host's connection, and, knowing of no other connection, it would checkpoint and
    delete the WAL that the host's connection still writes to. One SQLite library shares
    its locks between all the connections it opened to a file and never deletes a WAL
    another of them still uses; so the image must be read through the library that holds the
    file open. This function uses the standard library's ``sqlite3``. A host that keeps its
    ledger open through another binding with a SQLite of its own (``apsw``, ``pysqlite3``,
    ``sqlcipher3``) must pass a function written with that binding instead (the same few
    lines: open ``source`` with it, back it up into ``image``, close both), or close the
    ledger before each copy.

    How: SQLite's online backup API, all pages in one step (``pages=-1``), from a connection
    of its own that is opened read-write without creating anything (``mode=rw``) and closed
    before it returns. One step holds one read transaction for the whole image, so the image
    is exactly one committed state, rows still only in the WAL included; in WAL mode the
    host's writers go on meanwhile. The backup copies pages as they are (no rebuild of tables
    and indexes as ``VACUUM INTO`` does, so it costs what reading the file costs and works on
    any SQLite the standard library may be linked with); the image has the source's page size
    and journal mode. It waits as long as the core's own snapshots (5 seconds) for a writer that blocks readers (rollback
    journal mode) and then raises ``sqlite3.OperationalError``; any exception fails the copy
    and comes out of the copy's call as itself.
    """
    deadline = time.monotonic() + _TIMEOUT_S
    uri = "file:" + urllib.parse.quote(source) + "?mode=rw"

    def give_up_at_deadline(status: int, remaining: int, total: int) -> None:
        # Called after every step; a step that could not take its lock is retried (after
        # 250 ms) for as long as this does not raise.
        if status in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) and time.monotonic() >= deadline:
            raise sqlite3.OperationalError(
                f"{source}: the database stayed locked for {_TIMEOUT_S:g} s, no snapshot taken"
            )

    src = sqlite3.connect(uri, uri=True, timeout=_TIMEOUT_S, isolation_level=None)
    try:
        dst = sqlite3.connect(image, isolation_level=None)
        try:
            # Scratch, read once by the copy and thrown away: no journal, no flushing.
            dst.execute("PRAGMA journal_mode = OFF")
            dst.execute("PRAGMA synchronous = OFF")
            src.backup(dst, pages=-1, progress=give_up_at_deadline)
        finally:
            dst.close()
    finally:
        src.close()
