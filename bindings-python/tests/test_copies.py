"""Durable copies through Python: the stale writer that never wins (on the directory backend
and, given GOTRY_S3_URL, on an S3-compatible server), each reason a restore skips a copy,
the errors of the copies with their fields, and the GIL released while a copy moves."""

from __future__ import annotations

import base64
import json
import os
import pickle
import secrets
import sqlite3
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

import gotry_tenant_state as gts
from conftest import LEDGER, START_MS, Ticker

ORG = "acme"
TTL_MS = 10_000
NOTE = Path("notes") / "last.txt"


class World:
    """One scenario: a lease store on a manual wall clock, one durable store, a tenant of
    its own (so that copies left in a shared bucket by another run never meet this one),
    and a state root per replica."""

    def __init__(self, tmp_path: Path, durable: gts.DurableStore) -> None:
        self.tmp_path = tmp_path
        self.wall = gts.ManualClock(START_MS)
        self.leases = gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=self.wall)
        self.durable = durable
        self.tenant = "t-" + secrets.token_hex(16)
        self.key = gts.lease_key_for(ORG, self.tenant)

    def holder(self, replica: str) -> gts.TenantLease:
        # The holder's own clock never moves: a holder that was frozen after its check still
        # finds its gate open, which is the stale writer the copies must withstand.
        return gts.TenantLease.acquire(
            key=self.key,
            replica_id=replica,
            store=self.leases,
            ttl_ms=TTL_MS,
            margin_ms=1_000,
            clock=gts.ManualClock(0),
        )

    def let_leases_expire(self) -> None:
        self.wall.advance(TTL_MS + 1)

    def root(self, replica: str) -> Path:
        return Path(gts.tenant_root_for(self.tmp_path / replica, ORG, self.tenant))

    def object_path(self, epoch: int, seq: int, name: str) -> Path:
        assert isinstance(self.durable, gts.DirectoryDurableStore)
        return (
            Path(self.durable.path)
            / "orgs"
            / ORG
            / "tenants"
            / self.tenant
            / "epochs"
            / f"{epoch:020}"
            / f"{seq:020}"
            / name
        )

    def damage(self, epoch: int, seq: int, index: int) -> None:
        """Flips a byte of what copy (epoch, seq) made for file `index` (files are numbered in
        path order): its object, or its bytes inline in the manifest when they were small
        enough to ride there, so a test damages the same bytes wherever they are kept."""
        epochs = self.object_path(epoch, seq, "x").parent.parent.parent
        manifest_path = epochs / f"{epoch:020}" / f"{seq:020}.json"
        manifest = json.loads(manifest_path.read_bytes())
        file = manifest["files"][index]
        own = f"{epoch:020}/{seq:020}/files/{index:06}"
        made = [
            o
            for o in [file["base"], *file.get("base_pieces", []), *file.get("deltas", [])]
            if o["object"].startswith(own)
        ]
        assert made, f"copy {epoch}/{seq} made nothing for file {index}"
        if "inline" not in made[-1]:
            flip_a_byte(epochs / made[-1]["object"])
            return
        inline = bytearray(base64.b64decode(made[-1]["inline"]))
        inline[len(inline) // 2] ^= 0xFF
        made[-1]["inline"] = base64.b64encode(bytes(inline)).decode()
        manifest_path.write_text(json.dumps(manifest))

    def close(self) -> None:
        self.leases.close()


def write_state(root: Path, entries: list[str]) -> None:
    """A tenant root whose ledger (a real SQLite file) holds `entries`, and one more file."""
    ledger = root / LEDGER
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(ledger)) as db, db:
        db.execute("CREATE TABLE IF NOT EXISTS entries (text TEXT NOT NULL)")
        db.execute("DELETE FROM entries")
        db.executemany("INSERT INTO entries (text) VALUES (?)", [(entry,) for entry in entries])
    (root / NOTE).parent.mkdir(parents=True, exist_ok=True)
    (root / NOTE).write_text(",".join(entries))


def read_state(root: Path) -> list[str]:
    """The ledger's entries, read without writing anything next to it."""
    with closing(sqlite3.connect(f"file:{root / LEDGER}?mode=ro", uri=True)) as db:
        entries = [row[0] for row in db.execute("SELECT text FROM entries ORDER BY rowid")]
    assert (root / NOTE).read_text() == ",".join(entries)
    return entries


def flip_a_byte(path: Path) -> None:
    offset = path.stat().st_size // 2
    with path.open("r+b") as file:
        file.seek(offset)
        byte = file.read(1)
        file.seek(offset)
        file.write(bytes([byte[0] ^ 0xFF]))


@pytest.fixture
def directory_world(tmp_path: Path) -> Iterator[World]:
    world = World(tmp_path, gts.DirectoryDurableStore(tmp_path / "durable"))
    yield world
    world.close()


S3_URL = os.environ.get("GOTRY_S3_URL", "")


@pytest.fixture(params=["directory", "s3"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    if request.param == "directory":
        durable: gts.DurableStore = gts.DirectoryDurableStore(tmp_path / "durable")
    elif S3_URL:
        durable = gts.open_durable_store(S3_URL)
    else:
        pytest.skip(
            "GOTRY_S3_URL is not set: the S3 run needs an S3-compatible server "
            "(scripts/test.sh starts moto and sets it)"
        )
    opened = World(tmp_path, durable)
    yield opened
    opened.close()


def a_holder_with_two_copies(world: World) -> tuple[gts.TenantLease, gts.EpochCopies, Path]:
    """Replica A at epoch 1, after an empty start, with copies 1 (a1) and 2 (a1, a2)."""
    a = world.holder("replica-a")
    assert a.epoch == 1
    copies = gts.EpochCopies(world.durable)
    root = world.root("a")
    start = copies.restore(a, root)
    assert (start.restored, start.skipped, start.files) == (None, [], 0)
    write_state(root, ["a1"])
    assert copies.write_copy(a, root).seq == 1
    write_state(root, ["a1", "a2"])
    assert copies.write_copy(a, root).seq == 2
    return a, copies, root


def b_after_a_ran_out(world: World) -> gts.TenantLease:
    """Replica B at epoch 2, after A wrote its two copies and its lease ran out."""
    a_holder_with_two_copies(world)
    world.let_leases_expire()
    return world.holder("replica-b")


def test_a_stale_writer_never_wins(world: World) -> None:
    a = world.holder("replica-a")
    assert a.epoch == 1
    copies_a = gts.EpochCopies(world.durable)
    root_a = world.root("a")
    assert copies_a.restore(a, root_a).restored is None
    write_state(root_a, ["a1"])
    first = copies_a.write_copy(a, root_a)
    assert (first.epoch, first.seq, first.files) == (1, 1, 2)
    write_state(root_a, ["a1", "a2"])
    assert copies_a.write_copy(a, root_a).seq == 2

    # A stalls: its lease runs out on the store's clock, but its own gate still passes.
    world.let_leases_expire()
    a.assert_held()
    b = world.holder("replica-b")
    assert b.epoch == 2
    root_b = world.root("b")
    report = gts.EpochCopies(world.durable).restore(b, root_b)
    assert report.restored == gts.CopyId(1, 2)
    assert report.skipped == []
    assert read_state(root_b) == ["a1", "a2"]
    assert report.files == 2
    write_state(root_b, ["a1", "a2", "b1"])
    copies_b = gts.EpochCopies(world.durable)
    written_b = copies_b.write_copy(b, root_b)
    assert (written_b.epoch, written_b.seq) == (2, 1)

    # A wakes past its own check and writes again: it lands, in epoch 1's prefix.
    write_state(root_a, ["a1", "a2", "a-late"])
    late = copies_a.write_copy(a, root_a)
    assert (late.epoch, late.seq, late.files) == (1, 3, 2)
    listed = {(c.epoch, c.seq): c.complete for c in copies_a.list(world.key)}
    assert listed == {(1, 1): True, (1, 2): True, (1, 3): True, (2, 1): True}

    world.let_leases_expire()
    c = world.holder("replica-c")
    assert c.epoch == 3
    root_c = world.root("c")
    report = gts.EpochCopies(world.durable).restore(c, root_c)
    assert report.restored == gts.CopyId(2, 1)
    assert read_state(root_c) == ["a1", "a2", "b1"]

    # Nothing on the way printed a credential of the store's URL.
    if not isinstance(world.durable, gts.DirectoryDurableStore):
        user_info = urllib.parse.urlsplit(S3_URL).netloc.rpartition("@")[0]
        if user_info:
            for shown in (world.durable.location, repr(world.durable), repr(copies_a)):
                assert user_info + "@" not in shown, shown


def test_a_stale_writers_late_copy_is_superseded_even_when_the_newer_copy_is_damaged(
    directory_world: World,
) -> None:
    # Without B's copy to fall back on, C reaches epoch 1, where A's late copy is the newest:
    # B's tenure began from (1, 2), so (1, 3) is a stale holder's and must be passed over.
    world = directory_world
    a, copies_a, root_a = a_holder_with_two_copies(world)
    world.let_leases_expire()
    b = world.holder("replica-b")
    root_b = world.root("b")
    copies_b = gts.EpochCopies(world.durable)
    assert copies_b.restore(b, root_b).restored == gts.CopyId(1, 2)
    write_state(root_b, ["a1", "a2", "b1"])
    assert copies_b.write_copy(b, root_b).seq == 1
    write_state(root_a, ["a1", "a2", "a-late"])
    assert copies_a.write_copy(a, root_a).seq == 3
    world.damage(2, 1, 0)

    world.let_leases_expire()
    c = world.holder("replica-c")
    root_c = world.root("c")
    report = gts.EpochCopies(world.durable).restore(c, root_c)
    assert report.skipped == [gts.SkippedCopy(2, 1, "checksum"), gts.SkippedCopy(1, 3, "superseded")]
    assert report.restored == gts.CopyId(1, 2)
    assert read_state(root_c) == ["a1", "a2"]


def test_a_flipped_byte_is_skipped_and_the_older_copy_restored(directory_world: World) -> None:
    world = directory_world
    b = b_after_a_ran_out(world)
    # Index 0 is the ledger: files are numbered in the order of their paths.
    world.damage(1, 2, 0)
    report = gts.EpochCopies(world.durable).restore(b, world.root("b"))
    assert report.restored == gts.CopyId(1, 1)
    assert report.skipped == [gts.SkippedCopy(1, 2, "checksum")]
    assert report.skipped[0].reason == "checksum"
    assert read_state(world.root("b")) == ["a1"]


def test_no_copy_that_verifies_is_restore_invalid_with_every_skipped_copy(directory_world: World) -> None:
    world = directory_world
    b = b_after_a_ran_out(world)
    world.damage(1, 2, 0)
    world.damage(1, 1, 1)
    root_b = world.root("b")
    write_state(root_b, ["untouched"])
    with pytest.raises(gts.RestoreVerificationError) as caught:
        gts.EpochCopies(world.durable).restore(b, root_b)
    error = caught.value
    assert error.code == "GOTRY_TENANT_RESTORE_INVALID"
    assert error.skipped == [gts.SkippedCopy(1, 2, "checksum"), gts.SkippedCopy(1, 1, "checksum")]
    assert [(s.epoch, s.seq, s.reason) for s in error.skipped] == [(1, 2, "checksum"), (1, 1, "checksum")]
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.skipped, str(copy)) == (gts.RestoreVerificationError, error.skipped, str(error))
    # A refused restore leaves the root as it was.
    assert read_state(root_b) == ["untouched"]


def test_a_verify_that_refuses_skips_the_copy_as_fold(directory_world: World) -> None:
    world = directory_world
    b = b_after_a_ran_out(world)
    root_b = world.root("b")
    seen: list[tuple[str, list[str]]] = []

    def verify(path: str) -> bool:
        assert isinstance(path, str)
        entries = read_state(Path(path))
        seen.append((path, entries))
        return "a2" not in entries

    report = gts.EpochCopies(world.durable).restore(b, root_b, verify=verify)
    assert report.restored == gts.CopyId(1, 1)
    assert report.skipped == [gts.SkippedCopy(1, 2, "fold")]
    assert [entries for _, entries in seen] == [["a1", "a2"], ["a1"]]
    # It saw each candidate before it was put in place, never the tenant root itself.
    assert all(Path(path) != root_b for path, _ in seen)
    assert read_state(root_b) == ["a1"]


def test_a_verify_that_refuses_every_copy_is_restore_invalid(directory_world: World) -> None:
    world = directory_world
    b = b_after_a_ran_out(world)
    with pytest.raises(gts.RestoreVerificationError) as caught:
        gts.EpochCopies(world.durable).restore(b, world.root("b"), verify=lambda path: False)
    assert [s.reason for s in caught.value.skipped] == ["fold", "fold"]


def test_an_exception_raised_by_verify_comes_out_unchanged(directory_world: World) -> None:
    world = directory_world
    b = b_after_a_ran_out(world)
    copies = gts.EpochCopies(world.durable)

    class FoldBroke(Exception):
        pass

    raised = FoldBroke("the fold does not add up")

    def verify(path: str) -> bool:
        raise raised

    with pytest.raises(FoldBroke) as caught:
        copies.restore(b, world.root("b"), verify=verify)
    assert caught.value is raised
    # The failed restore recorded nothing: the same holder restores once the check passes.
    assert copies.restore(b, world.root("b"), verify=lambda path: True).restored == gts.CopyId(1, 2)


def test_verify_must_be_a_callable_returning_a_bool(directory_world: World) -> None:
    world = directory_world
    b = b_after_a_ran_out(world)
    copies = gts.EpochCopies(world.durable)
    with pytest.raises(TypeError, match="callable"):
        copies.restore(b, world.root("b"), verify="yes")  # type: ignore[arg-type]
    # A truthy answer that is not a bool accepts nothing.
    with pytest.raises(TypeError, match="must return a bool, got str"):
        copies.restore(b, world.root("b"), verify=lambda path: "no")  # type: ignore[arg-type,return-value]


def test_a_foreign_object_in_the_holders_prefix_is_a_copy_conflict(directory_world: World) -> None:
    world = directory_world
    a, copies, root = a_holder_with_two_copies(world)
    foreign = world.object_path(1, 7, "files/000000")
    foreign.parent.mkdir(parents=True)
    foreign.write_bytes(b"written by someone else")
    with pytest.raises(gts.CopyConflictError) as caught:
        copies.write_copy(a, root)
    assert caught.value.code == "GOTRY_TENANT_COPY_CONFLICT"
    assert pickle.loads(pickle.dumps(caught.value)).code == "GOTRY_TENANT_COPY_CONFLICT"
    # The copy was not taken as written, and nothing was added beside the stranger's object.
    assert [(c.epoch, c.seq, c.complete) for c in copies.list(world.key)] == [
        (1, 1, True),
        (1, 2, True),
        (1, 7, False),
    ]


def test_an_unusable_store_folder_is_durable_store_unavailable(tmp_path: Path) -> None:
    # Tests run as root, whom permissions do not stop: a regular file where a folder must be
    # stops everyone.
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(gts.DurableStoreUnavailableError) as caught:
        gts.DirectoryDurableStore(blocker / "durable")
    error = caught.value
    assert (error.code, error.backend_code) == ("GOTRY_TENANT_DURABLE_STORE_UNAVAILABLE", "ENOTDIR")
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.backend_code, str(copy)) == (type(error), "ENOTDIR", str(error))
    with pytest.raises(gts.DurableStoreUnavailableError) as caught:
        gts.open_durable_store(f"file://{blocker / 'durable'}")
    assert caught.value.backend_code == "ENOTDIR"


def test_a_store_that_fails_mid_tenure_leaves_the_lease_alone(directory_world: World) -> None:
    world = directory_world
    a, copies, root = a_holder_with_two_copies(world)
    assert isinstance(world.durable, gts.DirectoryDurableStore)
    store_folder = Path(world.durable.path)
    (store_folder / "orgs").rename(store_folder / "orgs-away")
    (store_folder / "orgs").write_text("")
    with pytest.raises(gts.DurableStoreUnavailableError) as caught:
        copies.write_copy(a, root)
    assert caught.value.backend_code == "ENOTDIR"
    a.assert_held()
    # Once the store is back, the next copy succeeds.
    (store_folder / "orgs").unlink()
    (store_folder / "orgs-away").rename(store_folder / "orgs")
    assert copies.write_copy(a, root).seq == 3


def test_forget_copies_deletes_what_the_floor_covers(directory_world: World) -> None:
    world = directory_world
    a, copies, root = a_holder_with_two_copies(world)
    assert a.mark_forgotten().forgotten_at_epoch == 1
    assert copies.forget_copies(a) == [gts.CopyId(1, 1), gts.CopyId(1, 2)]
    # A copy now would lie below the floor, where no restore looks: refused, nothing written.
    with pytest.raises(gts.CopyConflictError):
        copies.write_copy(a, root)
    assert copies.list(world.key) == []
    world.let_leases_expire()
    b = world.holder("replica-b")
    assert b.forgotten_at_epoch == 1
    assert gts.EpochCopies(world.durable).restore(b, world.root("b")).restored is None
    # Only the holder the lease store names deletes copies.
    with pytest.raises(gts.LeaseLostError):
        copies.forget_copies(a)


def test_gc_keeps_the_newest_copies(directory_world: World) -> None:
    world = directory_world
    a, copies, root = a_holder_with_two_copies(world)
    copies.write_copy(a, root)
    report = copies.gc(a, keep=2)
    assert (report.kept, report.deleted) == ([gts.CopyId(1, 3), gts.CopyId(1, 2)], [gts.CopyId(1, 1)])
    assert [(c.epoch, c.seq) for c in copies.list(world.key)] == [(1, 2), (1, 3)]
    with pytest.raises(ValueError, match="at least one"):
        copies.gc(a, keep=0)
    with pytest.raises(ValueError, match="keep must be an int"):
        copies.gc(a, keep=True)


def test_copy_values_compare_print_and_pickle() -> None:
    values: list[object] = [
        gts.CopyId(2, 7),
        gts.SkippedCopy(2, 7, "superseded"),
        gts.WrittenCopy(2, 7, 3, 4096),
        gts.CopyListing(2, 7, False, 2, 100),
    ]
    for value in values:
        copy = pickle.loads(pickle.dumps(value))
        assert copy == value and hash(copy) == hash(value) and repr(copy) == repr(value)
    assert repr(values[1]) == "SkippedCopy(epoch=2, seq=7, reason='superseded')"
    assert gts.CopyId(1, 9) < gts.CopyId(2, 1) < gts.CopyId(2, 2)
    match values[1]:
        case gts.SkippedCopy(epoch, seq, reason):
            assert (epoch, seq, reason) == (2, 7, "superseded")
        case _:
            pytest.fail("SkippedCopy does not match by position")
    with pytest.raises(ValueError, match="reason must be one of"):
        gts.SkippedCopy(1, 1, "tired")  # type: ignore[arg-type]


def test_the_gil_is_released_while_a_large_copy_is_written_and_restored(directory_world: World) -> None:
    world = directory_world
    a = world.holder("replica-a")
    copies = gts.EpochCopies(world.durable)
    root = world.root("a")
    copies.restore(a, root)
    write_state(root, ["a1"])
    (root / "blob.bin").write_bytes(os.urandom(48 * 1024 * 1024))
    with Ticker() as ticker:
        before = ticker.ticks
        started = time.monotonic()
        copies.write_copy(a, root)
        during_write = ticker.ticks - before
        write_seconds = time.monotonic() - started

        world.let_leases_expire()
        b = world.holder("replica-b")
        before = ticker.ticks
        started = time.monotonic()
        report = gts.EpochCopies(world.durable).restore(b, world.root("b"))
        during_restore = ticker.ticks - before
        restore_seconds = time.monotonic() - started
    assert report.restored == gts.CopyId(1, 1)
    assert report.bytes >= 48 * 1024 * 1024
    # The ticker cannot count while a thread holds the GIL: a few ticks at most would slip in
    # at the edges of each call.
    assert during_write >= 10, f"the ticker ran {during_write} times in {write_seconds:.3f} s of write_copy"
    assert during_restore >= 10, f"the ticker ran {during_restore} times in {restore_seconds:.3f} s of restore"


# ---- Files the host has open in this process: the host snapshot ----------------------------


def hold_ledger_in_wal(root: Path, checkpointed: list[str], wal_only: list[str]) -> sqlite3.Connection:
    """Opens the tenant's ledger as a host does and keeps it open: WAL mode, automatic
    checkpoints off, `checkpointed` rows moved into the database file and `wal_only` rows
    committed but still only in the -wal file."""
    ledger = root / LEDGER
    ledger.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(ledger, isolation_level=None)
    assert db.execute("PRAGMA journal_mode = WAL").fetchone() == ("wal",)
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.execute("CREATE TABLE IF NOT EXISTS entries (text TEXT NOT NULL)")
    db.executemany("INSERT INTO entries (text) VALUES (?)", [(entry,) for entry in checkpointed])
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.executemany("INSERT INTO entries (text) VALUES (?)", [(entry,) for entry in wal_only])
    return db


def rows(db: sqlite3.Connection) -> list[str]:
    return [row[0] for row in db.execute("SELECT text FROM entries ORDER BY rowid")]


def rows_of_the_database_file_alone(ledger: Path, scratch: Path) -> list[str]:
    """What the ledger's main file holds without its WAL: a copy of that one file, read."""
    scratch.mkdir()
    alone = scratch / "alone.db"
    alone.write_bytes(ledger.read_bytes())
    with closing(sqlite3.connect(f"file:{alone}?mode=ro", uri=True)) as db:
        return rows(db)


_TRY_TO_WRITE = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
try:
    db.execute("BEGIN IMMEDIATE")
except sqlite3.OperationalError as e:
    print("refused", e)
else:
    print("granted")
"""


def another_process_may_write(ledger: Path) -> bool:
    """Whether another process gets the ledger's write lock at once. While this process's
    connection holds a write transaction it must not. In WAL mode that lock is a POSIX lock
    on the -shm file, and POSIX locks belong to the process: a second SQLite of this process
    that opened the ledger and closed it again would have closed its -shm descriptor and
    dropped the lock (closing any descriptor of the -shm does), letting the other process in."""
    answer = subprocess.run(
        [sys.executable, "-c", _TRY_TO_WRITE, str(ledger)], capture_output=True, text=True, check=True
    ).stdout
    assert answer.startswith(("refused", "granted")), answer
    return answer.startswith("granted")


def test_a_ledger_held_in_this_process_is_not_copied_without_a_snapshot(directory_world: World) -> None:
    world = directory_world
    a = world.holder("replica-a")
    copies = gts.EpochCopies(world.durable)
    root = world.root("a")
    copies.restore(a, root)
    db = hold_ledger_in_wal(root, ["c1"], ["w1", "w2"])
    try:
        wal = root / f"{LEDGER}-wal"
        wal_before = wal.read_bytes()
        assert wal_before, "the WAL holds the uncheckpointed rows"
        with pytest.raises(gts.OpenInProcessError) as caught:
            copies.write_copy(a, root)
        error = caught.value
        assert error.code == "GOTRY_TENANT_OPEN_IN_PROCESS"
        assert str(root / LEDGER) in str(error)
        copy = pickle.loads(pickle.dumps(error))
        assert (type(copy), copy.code, str(copy)) == (gts.OpenInProcessError, "GOTRY_TENANT_OPEN_IN_PROCESS", str(error))
        # The host's WAL is untouched, its connection works and its locks still hold.
        assert wal.read_bytes() == wal_before
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO entries (text) VALUES ('w3')")
        assert another_process_may_write(root / LEDGER) is False
        db.execute("COMMIT")
        assert rows(db) == ["c1", "w1", "w2", "w3"]
        # Nothing of a copy was written.
        assert copies.list(world.key) == []
    finally:
        db.close()
    # Closed, the ledger is the copies' to read again, through their own SQLite.
    assert copies.write_copy(a, root).files == 1


def test_a_held_ledger_is_copied_through_sqlite3_snapshot_with_its_wal_rows(
    directory_world: World, tmp_path: Path
) -> None:
    world = directory_world
    a = world.holder("replica-a")
    calls: list[tuple[str, str]] = []

    def snapshot(source: str, image: str) -> None:
        calls.append((source, image))
        gts.sqlite3_snapshot(source, image)

    copies = gts.EpochCopies(world.durable, snapshot=snapshot)
    root = world.root("a")
    copies.restore(a, root)
    db = hold_ledger_in_wal(root, ["c1", "c2"], ["w1", "w2"])
    try:
        ledger = root / LEDGER
        wal = root / f"{LEDGER}-wal"
        # The test means something only if those rows are in the WAL and nowhere else.
        assert rows_of_the_database_file_alone(ledger, tmp_path / "alone") == ["c1", "c2"]
        wal_before = wal.read_bytes()
        written = copies.write_copy(a, root)
        assert (written.epoch, written.seq, written.files) == (1, 1, 1)
        # Its WAL has frames: the copy reads the file and the frames, without the host's library.
        assert calls == []
        assert wal.read_bytes() == wal_before
        # Emptied by a checkpoint, the WAL tells nothing: the host's function is asked, once, for
        # the ledger; its -wal and -shm are inside the image.
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        written = copies.write_copy(a, root)
        assert (written.epoch, written.seq, written.files) == (1, 2, 1)
        assert [source for source, _ in calls] == [str(ledger)]
        assert all(isinstance(source, str) and isinstance(image, str) for source, image in calls)
        assert not Path(calls[0][1]).is_relative_to(root)
        # The host's connection goes on, with its locks.
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO entries (text) VALUES ('after the copy')")
        assert another_process_may_write(ledger) is False
        db.execute("COMMIT")
    finally:
        db.close()

    world.let_leases_expire()
    b = world.holder("replica-b")
    root_b = world.root("b")
    report = gts.EpochCopies(world.durable).restore(b, root_b)
    assert report.restored == gts.CopyId(1, 2)
    with closing(sqlite3.connect(f"file:{root_b / LEDGER}?mode=ro", uri=True)) as restored:
        assert rows(restored) == ["c1", "c2", "w1", "w2"]
        assert restored.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_an_exception_raised_by_the_snapshot_fails_the_copy_as_itself(directory_world: World) -> None:
    world = directory_world
    a = world.holder("replica-a")

    class SnapshotBroke(Exception):
        pass

    raised = SnapshotBroke("the host's library refused")

    def snapshot(source: str, image: str) -> None:
        raise raised

    copies = gts.EpochCopies(world.durable, snapshot=snapshot)
    root = world.root("a")
    copies.restore(a, root)
    # An empty WAL tells nothing of the ledger, so the copy asks the host.
    db = hold_ledger_in_wal(root, ["c1"], [])
    try:
        with pytest.raises(SnapshotBroke) as caught:
            copies.write_copy(a, root)
        assert caught.value is raised
        assert copies.list(world.key) == []
        assert rows(db) == ["c1"]
    finally:
        db.close()
    with pytest.raises(TypeError, match="snapshot must be a callable"):
        gts.EpochCopies(world.durable, snapshot="sqlite3")  # type: ignore[arg-type]
    assert "snapshot=" in repr(copies) and "snapshot=" not in repr(gts.EpochCopies(world.durable))


def test_a_restore_into_a_root_this_process_holds_is_refused_and_changes_nothing(
    directory_world: World,
) -> None:
    world = directory_world
    b = b_after_a_ran_out(world)
    root_b = world.root("b")
    db = hold_ledger_in_wal(root_b, ["mine"], ["mine too"])
    copies = gts.EpochCopies(world.durable, snapshot=gts.sqlite3_snapshot)

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    try:
        before = files(root_b)
        assert f"{LEDGER}-wal" in before
        with pytest.raises(gts.OpenInProcessError):
            copies.restore(b, root_b)
        assert files(root_b) == before
        db.execute("INSERT INTO entries (text) VALUES ('still mine')")
        assert rows(db) == ["mine", "mine too", "still mine"]
        # No tenure began: no marker in epoch 2's prefix.
        assert isinstance(world.durable, gts.DirectoryDurableStore)
        marker = world.object_path(2, 0, "x").parent.parent / "tenure.json"
        assert marker.parent.name == f"{2:020}" and not marker.exists()
    finally:
        db.close()
    report = copies.restore(b, root_b)
    assert report.restored == gts.CopyId(1, 2)
    assert read_state(root_b) == ["a1", "a2"]


@pytest.mark.parametrize("root", ["", "/", "//", "/.."])
def test_an_empty_or_file_system_root_is_a_value_error_before_any_io(
    directory_world: World, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = directory_world
    copies = gts.EpochCopies(w.durable)
    a = w.holder("a")
    monkeypatch.chdir(w.tmp_path)
    before = sorted(os.listdir("."))
    with pytest.raises(ValueError, match="a tenant root must not be"):
        copies.write_copy(a, root)
    with pytest.raises(ValueError, match="a tenant root must not be"):
        copies.restore(a, root)
    with pytest.raises(ValueError, match="a router's state root must not be"):
        gts.TenantRouter(w.leases, w.durable, root, "replica-r", TTL_MS, 1_000)
    with pytest.raises(ValueError, match="a durable store folder must not be"):
        gts.DirectoryDurableStore(root)
    assert copies.list(w.key) == []
    assert sorted(os.listdir(".")) == before


def test_a_restore_never_replaces_the_folder_holding_the_working_directory(
    directory_world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = directory_world
    copies = gts.EpochCopies(w.durable)
    a = w.holder("a")
    root = w.tmp_path / "root"
    (root / "inner").mkdir(parents=True)
    (root / "keep.txt").write_text("mine")
    monkeypatch.chdir(root / "inner")
    with pytest.raises(ValueError, match="working directory"):
        copies.restore(a, root)
    with pytest.raises(ValueError, match="working directory"):
        copies.restore(a, "..")
    assert (root / "keep.txt").read_text() == "mine"
