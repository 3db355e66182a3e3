"""Arguments that only Python can get wrong: bools and floats where an int is due, ints
beyond 64 bits, non-str text, lone surrogates, and text measured as the reference measures it."""

from __future__ import annotations

from pathlib import Path

import pytest

import gotry_tenant_state as gts

NOT_INTEGERS: list[object] = [True, False, 1000.0, 1e3, "1000", None, b"1000", [1000]]
BEYOND_64_BITS: list[int] = [2**63, -(2**63) - 1, 2**100, -(2**200)]


def test_ttl_bounds() -> None:
    assert gts.MIN_LEASE_TTL_MS == 100
    assert gts.MAX_LEASE_TTL_MS == 600_000
    assert gts.assert_lease_ttl(100) == 100
    assert gts.assert_lease_ttl(600_000) == 600_000
    for bad in (99, 600_001, 0, -1):
        with pytest.raises(ValueError):
            gts.assert_lease_ttl(bad)


@pytest.mark.parametrize("bad", NOT_INTEGERS + BEYOND_64_BITS)
def test_only_ints_are_ttls(bad: object) -> None:
    with pytest.raises(ValueError) as caught:
        gts.assert_lease_ttl(bad)  # type: ignore[arg-type]
    # A plain ValueError, not an OverflowError or a TenantStateError.
    assert type(caught.value) is ValueError


@pytest.mark.parametrize("bad", NOT_INTEGERS + BEYOND_64_BITS + [99, 600_001])
def test_store_refuses_bad_ttls_before_writing(store: gts.SqliteLeaseStore, bad: object) -> None:
    with pytest.raises(ValueError):
        store.acquire("k", "a", bad)  # type: ignore[arg-type]
    assert store.history() == []
    store.acquire("k", "a", 1000)
    with pytest.raises(ValueError):
        store.renew("k", "a", 1, bad)  # type: ignore[arg-type]
    assert [entry.op for entry in store.history()] == ["acquire"]


@pytest.mark.parametrize("bad", NOT_INTEGERS + BEYOND_64_BITS + [0, -1])
def test_store_refuses_bad_epochs(store: gts.SqliteLeaseStore, bad: object) -> None:
    store.acquire("k", "a", 1000)
    with pytest.raises(ValueError):
        store.renew("k", "a", bad, 1000)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.release("k", "a", bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.mark_forgotten("k", "a", bad)  # type: ignore[arg-type]
    assert [entry.op for entry in store.history()] == ["acquire"]


@pytest.mark.parametrize("bad", [-1, 1000, 1001, True, 1.5, 2**64, None])
def test_lease_margin_is_an_int_below_the_ttl(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock, bad: object
) -> None:
    with pytest.raises(ValueError):
        gts.TenantLease.acquire(key="k", replica_id="a", store=store, ttl_ms=1000, margin_ms=bad, clock=clock)  # type: ignore[arg-type]
    assert store.read("k") is None


@pytest.mark.parametrize("bad", [True, 99, 1000.0, 2**70])
def test_lease_ttl_is_checked_before_the_store_is_asked(
    store: gts.SqliteLeaseStore, clock: gts.ManualClock, bad: object
) -> None:
    with pytest.raises(ValueError):
        gts.TenantLease.acquire(key="k", replica_id="a", store=store, ttl_ms=bad, margin_ms=0, clock=clock)  # type: ignore[arg-type]
    assert store.read("k") is None


@pytest.mark.parametrize("bad", [42, None, b"k", ("k",)])
def test_text_arguments_must_be_str(store: gts.SqliteLeaseStore, clock: gts.ManualClock, bad: object) -> None:
    with pytest.raises(ValueError):
        store.acquire(bad, "a", 1000)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.acquire("k", bad, 1000)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        store.read(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        gts.TenantLease.acquire(key=bad, replica_id="a", store=store, ttl_ms=1000, margin_ms=0, clock=clock)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        gts.TenantLease.acquire(key="k", replica_id=bad, store=store, ttl_ms=1000, margin_ms=0, clock=clock)  # type: ignore[arg-type]
    assert store.history() == []


@pytest.mark.parametrize("bad", ["\ud800", "k\udc00", "\ud83d\ude00"])
def test_lone_surrogates_in_text_are_refused_not_replaced(store: gts.SqliteLeaseStore, bad: str) -> None:
    with pytest.raises(ValueError, match="surrogate"):
        store.acquire(bad, "a", 1000)
    with pytest.raises(ValueError, match="surrogate"):
        store.acquire("k", bad, 1000)
    with pytest.raises(ValueError, match="surrogate"):
        store.history(bad)
    assert store.history() == []


def test_text_length_counts_utf16_units_as_the_reference(store: gts.SqliteLeaseStore) -> None:
    # 100 emoji are 200 UTF-16 code units: accepted; 101 are 202: refused.
    store.acquire("k1", "😀" * 100, 1000)
    with pytest.raises(ValueError):
        store.acquire("k2", "😀" * 101, 1000)
    store.acquire("k3", "é" * 200, 1000)
    with pytest.raises(ValueError):
        store.acquire("k4", "é" * 201, 1000)
    store.acquire("x" * 200, "a", 1000)
    with pytest.raises(ValueError):
        store.acquire("x" * 201, "a", 1000)
    with pytest.raises(ValueError):
        store.acquire("", "a", 1000)
    with pytest.raises(ValueError):
        store.acquire("k5", "", 1000)
    assert [entry.key for entry in store.history()] == ["k1", "k3", "x" * 200]
    record = store.read("k1")
    assert record is not None and record.owner == "😀" * 100


def test_manual_clock_arguments() -> None:
    clock = gts.ManualClock()
    assert clock.now_ms() == 0
    assert clock.advance(-5) == -5
    clock.set(2**63 - 1)
    with pytest.raises(ValueError):
        clock.advance(1)
    assert clock.now_ms() == 2**63 - 1
    for bad in (True, 1.0, 2**63, "1"):
        with pytest.raises(ValueError):
            clock.advance(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            clock.set(bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            gts.ManualClock(bad)  # type: ignore[arg-type]
    assert repr(gts.ManualClock(7)) == "ManualClock(now_ms=7)"


def test_clock_arguments_must_be_clocks(tmp_path: Path, store: gts.SqliteLeaseStore) -> None:
    with pytest.raises(TypeError):
        gts.SqliteLeaseStore(tmp_path / "unused.db", now_ms=1234)  # type: ignore[arg-type]
    assert not (tmp_path / "unused.db").exists()
    with pytest.raises(TypeError):
        gts.TenantLease.acquire(key="k", replica_id="a", store=store, ttl_ms=1000, margin_ms=0, clock=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        gts.TenantLease.acquire(key="k", replica_id="a", store="leases.db", ttl_ms=1000, margin_ms=0)  # type: ignore[arg-type]
    assert store.read("k") is None


def test_busy_timeout_must_be_a_non_negative_int(tmp_path: Path) -> None:
    for bad in (-1, True, 1.5, 2**64):
        with pytest.raises(ValueError):
            gts.SqliteLeaseStore(tmp_path / "unused.db", busy_timeout_ms=bad)  # type: ignore[arg-type]
    assert not (tmp_path / "unused.db").exists()
