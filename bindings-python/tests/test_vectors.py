"""The shared vectors of tests/vectors/, which every language's suite reads.

Their expected values come from tests/vectors/generate.py (the standard library's HMAC and
an independent model of the lease rules), never from the core, so a rule that the Python
module alone gets wrong, or that the core and its bindings get wrong together, fails here.
The vectors spell every answer as JSON: a value, or ``{"error": CODE}``, where CODE is an
exception's ``.code`` or ``INVALID_ARGUMENT`` for a plain ``ValueError``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gotry_tenant_state as gts

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors"
INVALID_ARGUMENT = "INVALID_ARGUMENT"
ID_INVALID = "GOTRY_TENANT_ID_INVALID"

Json = Any


def load(name: str) -> Json:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


def nonempty(cases: list[Json], what: str) -> list[Json]:
    """Refuses an empty list at collection: an empty parameter set would only be skipped."""
    assert cases, f"no {what} in the vectors"
    return cases


IDS: dict[str, list[Json]] = load("ids.json")
SCENARIOS = nonempty(load("store-scenarios.json"), "store scenarios")

VALIDATORS: dict[str, Callable[[object], str]] = {
    "organization_ids": gts.assert_organization_id,
    "ledger_tenant_ids": gts.assert_ledger_tenant_id,
    "prompt_cache_partitions": gts.assert_prompt_cache_partition,
}
# Every section of ids.json that this file reads; a section added to the vectors and read
# by nobody here fails test_every_id_section_is_read.
ID_SECTIONS = {"derive", "derive_utf16", "lease_keys", "tenant_roots", *VALIDATORS}


def section(name: str) -> list[Json]:
    return nonempty(IDS[name], f"{name} cases")


def label(value: str) -> str:
    return value if len(value) <= 40 else f"{value[:20]}...({len(value)} chars)"


def record_json(record: gts.LeaseRecord | None) -> Json:
    if record is None:
        return None
    return {
        "key": record.key,
        "owner": record.owner,
        "epoch": record.epoch,
        "lease_until_ms": record.lease_until_ms,
        "forgotten_at_epoch": record.forgotten_at_epoch,
    }


def outcome(call: Callable[[], Json]) -> Json:
    """The call's answer in the vectors' spelling: its value, or the error it raised."""
    try:
        return call()
    except gts.LeaseHeldError as error:
        return {"error": error.code, "record": record_json(error.record)}
    except gts.TenantStateError as error:
        return {"error": error.code}
    except ValueError as error:
        # A subclass (UnicodeError, say) is some other failure, not a refused argument.
        if type(error) is not ValueError:
            raise
        return {"error": INVALID_ARGUMENT}


def claim(case: Json, name: str) -> str:
    """A claim as text, or built from its UTF-16 code units so that a lone surrogate reaches
    the module as itself (JSON text cannot carry one portably)."""
    if name in case:
        text: str = case[name]
        return text
    units: list[int] = case[f"{name}_utf16"]
    return struct.pack(f"<{len(units)}H", *units).decode("utf-16-le", errors="surrogatepass")


def derive_with_functions(key: bytes, issuer: str, subject: str) -> Json:
    tenant = gts.derive_ledger_tenant_id(key, issuer, subject)
    partition = gts.derive_prompt_cache_partition(key, tenant)
    return {"ledger_tenant_id": tenant, "prompt_cache_partition": partition}


def derive_with_organization_key(key: bytes, issuer: str, subject: str) -> Json:
    organization = gts.OrganizationKey(key)
    tenant = organization.derive_ledger_tenant_id(issuer, subject)
    partition = organization.derive_prompt_cache_partition(tenant)
    return {"ledger_tenant_id": tenant, "prompt_cache_partition": partition}


def test_every_id_section_is_read() -> None:
    assert set(IDS) == ID_SECTIONS


@pytest.mark.parametrize("derive", [derive_with_functions, derive_with_organization_key])
@pytest.mark.parametrize(
    "case",
    section("derive") + section("derive_utf16"),
    ids=[case["note"] for case in section("derive") + section("derive_utf16")],
)
def test_derive(case: Json, derive: Callable[[bytes, str, str], Json]) -> None:
    key = bytes.fromhex(case["key_hex"])
    issuer, subject = claim(case, "issuer"), claim(case, "subject")
    assert outcome(lambda: derive(key, issuer, subject)) == case["expect"]


def test_utf16_claims_carry_lone_surrogates() -> None:
    """The surrogate cases are only worth running when the built claim really holds one."""
    built = [claim(case, name) for case in section("derive_utf16") for name in ("issuer", "subject")]
    assert any(0xD800 <= ord(char) <= 0xDFFF for text in built for char in text)


@pytest.mark.parametrize(
    ("name", "case"),
    [(name, case) for name in VALIDATORS for case in section(name)],
    ids=[f"{name}:{label(case['value'])}" for name in VALIDATORS for case in section(name)],
)
def test_validator(name: str, case: Json) -> None:
    # The vectors say only valid or not; the reference refuses every malformed id with
    # InvalidTenantIdError, so that is the code a refusal must carry.
    expect = case["value"] if case["valid"] else {"error": ID_INVALID}
    assert outcome(lambda: VALIDATORS[name](case["value"])) == expect


@pytest.mark.parametrize("case", section("lease_keys"), ids=lambda case: f"{case['org']}/{case['tenant']}")
def test_lease_key(case: Json) -> None:
    assert outcome(lambda: gts.lease_key_for(case["org"], case["tenant"])) == case["expect"]


@pytest.mark.parametrize(
    "case", section("tenant_roots"), ids=lambda case: f"{case['state_root']}|{case['org']}|{case['tenant']}"
)
def test_tenant_root(case: Json) -> None:
    got = outcome(lambda: gts.tenant_root_for(case["state_root"], case["org"], case["tenant"]))
    assert got == case["expect"]


def grant_json(grant: gts.LeaseGrant) -> Json:
    return {"record": record_json(grant.record), "ttl_ms": grant.ttl_ms}


def history_json(entries: list[gts.HistoryEntry]) -> Json:
    return {
        "history": [
            {"key": e.key, "op": e.op, "owner": e.owner, "epoch": e.epoch, "at_ms": e.at_ms} for e in entries
        ]
    }


def play(store: gts.SqliteLeaseStore, step: Json) -> Json:
    """One call step against the store, answered in the vectors' spelling."""
    call = step["call"]
    if call == "read":
        return {"record": record_json(store.read(step["key"]))}
    if call == "acquire":
        return grant_json(store.acquire(step["key"], step["owner"], step["ttl_ms"]))
    if call == "renew":
        return grant_json(store.renew(step["key"], step["owner"], step["epoch"], step["ttl_ms"]))
    if call == "release":
        return {"record": record_json(store.release(step["key"], step["owner"], step["epoch"]))}
    if call == "mark_forgotten":
        return {"record": record_json(store.mark_forgotten(step["key"], step["owner"], step["epoch"]))}
    if call == "history":
        return history_json(store.history(step.get("key")))
    pytest.fail(f"a store call this test does not know: {step!r}")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario["name"] for scenario in SCENARIOS])
def test_store_scenario(scenario: Json, tmp_path: Path) -> None:
    clock = gts.ManualClock(scenario["start_ms"])
    calls = 0
    with gts.SqliteLeaseStore(tmp_path / "leases.db", now_ms=clock) as store:
        for index, step in enumerate(scenario["steps"]):
            if "advance_ms" in step:
                clock.advance(step["advance_ms"])
                continue
            got = outcome(lambda: play(store, step))
            assert got == step["expect"], f"step {index}: {step}"
            calls += 1
    assert calls > 0, "a scenario without a call proves nothing"
