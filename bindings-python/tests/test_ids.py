"""Tenant and organization ids through the module, checked against the reference's rules
and against an independent HMAC computed with the standard library."""

from __future__ import annotations

import array
import hmac
import os
import pickle
from pathlib import Path

import pytest

import gotry_tenant_state as gts

KEY = b"0123456789abcdef0123456789abcdef"
TENANT = "t-" + "0a" * 16


def stdlib_tenant_id(key: bytes, issuer: str, subject: str) -> str:
    message = issuer.encode() + b"\0" + subject.encode()
    return "t-" + hmac.new(key, message, "sha256").hexdigest()[:32]


def stdlib_partition(key: bytes, tenant: str) -> str:
    message = b"gotry/prompt-cache-partition/v1\0" + tenant.encode()
    return "pc-" + hmac.new(key, message, "sha256").hexdigest()[:32]


@pytest.mark.parametrize(
    ("issuer", "subject"),
    [
        ("https://idp.example", "user-1"),
        ("https://idp.example", "é"),
        ("iss", "e\u0301"),
        ("😀", "a" * 512),
        ("a" * 512, "\ufffd"),
    ],
)
def test_derivation_matches_the_stdlib_hmac(issuer: str, subject: str) -> None:
    tenant = gts.derive_ledger_tenant_id(KEY, issuer, subject)
    assert tenant == stdlib_tenant_id(KEY, issuer, subject)
    assert gts.assert_ledger_tenant_id(tenant) == tenant
    partition = gts.derive_prompt_cache_partition(KEY, tenant)
    assert partition == stdlib_partition(KEY, tenant)
    assert gts.assert_prompt_cache_partition(partition) == partition


def test_known_vector() -> None:
    tenant = gts.derive_ledger_tenant_id(KEY, "https://idp.example", "user-1")
    assert tenant == "t-20464cc2afc52b55ccbd6928130a63fd"
    assert gts.derive_prompt_cache_partition(KEY, tenant) == "pc-60e2110c6da3c630ee5bdcbb56ee01f3"


def test_no_unicode_normalization() -> None:
    assert gts.derive_ledger_tenant_id(KEY, "i", "\u00e9") != gts.derive_ledger_tenant_id(KEY, "i", "e\u0301")


@pytest.mark.parametrize("good", ["acme", "a", "0", "a-", "a--b", "a" * 63])
def test_organization_ids_accepted(good: str) -> None:
    assert gts.assert_organization_id(good) == good


@pytest.mark.parametrize(
    "bad", ["acme\n", "Acme", "a" * 64, "-acme", "", "ac me", "acmé", "a_b", "\nacme", "acme\ud800"]
)
def test_organization_ids_refused(bad: str) -> None:
    with pytest.raises(gts.InvalidTenantIdError) as caught:
        gts.assert_organization_id(bad)
    assert caught.value.code == "GOTRY_TENANT_ID_INVALID"


@pytest.mark.parametrize(
    "bad",
    [
        TENANT + "\n",
        TENANT.upper(),
        "t-" + "0" * 31,
        "t-" + "g" * 32,
        "x" + TENANT,
        "pc-" + "0" * 32,
    ],
)
def test_ledger_tenant_ids_refused(bad: str) -> None:
    with pytest.raises(gts.InvalidTenantIdError):
        gts.assert_ledger_tenant_id(bad)


def test_prompt_cache_partitions() -> None:
    good = "pc-" + "f" * 32
    assert gts.assert_prompt_cache_partition(good) == good
    for bad in [good + "\n", TENANT, "pc-" + "F" * 32]:
        with pytest.raises(gts.InvalidTenantIdError):
            gts.assert_prompt_cache_partition(bad)


@pytest.mark.parametrize("value", [42, None, b"acme", ["acme"], 4.5])
def test_non_str_ids_are_invalid_ids(value: object) -> None:
    for check in (gts.assert_organization_id, gts.assert_ledger_tenant_id, gts.assert_prompt_cache_partition):
        with pytest.raises(gts.InvalidTenantIdError):
            check(value)
    with pytest.raises(gts.InvalidTenantIdError):
        gts.lease_key_for(value, TENANT)  # type: ignore[arg-type]
    with pytest.raises(gts.InvalidTenantIdError):
        gts.tenant_root_for("/srv", "acme", value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [42, None, b"issuer", ("i",)])
def test_non_str_claims_are_invalid_ids(value: object) -> None:
    with pytest.raises(gts.InvalidTenantIdError):
        gts.derive_ledger_tenant_id(KEY, value, "subject")  # type: ignore[arg-type]
    with pytest.raises(gts.InvalidTenantIdError):
        gts.derive_ledger_tenant_id(KEY, "issuer", value)  # type: ignore[arg-type]
    with pytest.raises(gts.InvalidTenantIdError):
        gts.derive_prompt_cache_partition(KEY, value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "claim",
    [
        "",
        "a\0b",
        "\0",
        "a" * 513,
        "é" * 256 + "a",
        # Lone surrogates: refused, never replaced by U+FFFD.
        "\ud800",
        "a\udc00",
        "\udfff" + "z",
        # A high and a low surrogate as two code points are not an emoji in Python.
        "\ud83d\ude00",
    ],
)
def test_claims_refused(claim: str) -> None:
    with pytest.raises(gts.InvalidTenantIdError):
        gts.derive_ledger_tenant_id(KEY, claim, "subject")
    with pytest.raises(gts.InvalidTenantIdError):
        gts.derive_ledger_tenant_id(KEY, "issuer", claim)


def test_claim_byte_limit_is_512_utf8_bytes() -> None:
    assert gts.derive_ledger_tenant_id(KEY, "a" * 512, "s") == stdlib_tenant_id(KEY, "a" * 512, "s")
    assert gts.derive_ledger_tenant_id(KEY, "i", "é" * 256) == stdlib_tenant_id(KEY, "i", "é" * 256)


def test_a_surrogate_message_names_the_claim() -> None:
    with pytest.raises(gts.InvalidTenantIdError, match="subject"):
        gts.derive_ledger_tenant_id(KEY, "issuer", "a\ud800")
    with pytest.raises(gts.InvalidTenantIdError, match="issuer"):
        gts.derive_ledger_tenant_id(KEY, "\ud800", "subject")


def test_replacement_character_is_a_claim_of_its_own() -> None:
    assert gts.derive_ledger_tenant_id(KEY, "i", "a\ufffd") == stdlib_tenant_id(KEY, "i", "a\ufffd")


def test_short_keys_are_refused() -> None:
    for key in (KEY[:31], b"", bytearray(31), memoryview(KEY)[:31]):
        with pytest.raises(gts.InvalidTenantIdError):
            gts.derive_ledger_tenant_id(key, "i", "s")
        with pytest.raises(gts.InvalidTenantIdError):
            gts.derive_prompt_cache_partition(key, TENANT)
        with pytest.raises(gts.InvalidTenantIdError):
            gts.OrganizationKey(key)


def test_keys_may_be_bytes_bytearray_or_memoryview() -> None:
    expected = stdlib_tenant_id(KEY, "i", "s")
    doubled = bytes(b for pair in zip(KEY, b"\xff" * 32) for b in pair)
    for key in (
        KEY,
        bytearray(KEY),
        memoryview(KEY),
        memoryview(bytearray(KEY)),
        # Not contiguous: every other byte of a 64-byte buffer.
        memoryview(doubled)[::2],
    ):
        assert gts.derive_ledger_tenant_id(key, "i", "s") == expected
        assert gts.OrganizationKey(key).derive_ledger_tenant_id("i", "s") == expected


def test_a_key_that_changes_later_does_not_change_a_derived_key() -> None:
    mutable = bytearray(KEY)
    organization = gts.OrganizationKey(mutable)
    mutable[:] = b"\x00" * 32
    assert organization.derive_ledger_tenant_id("i", "s") == stdlib_tenant_id(KEY, "i", "s")


@pytest.mark.parametrize("key", [KEY.decode(), 12345, None, array.array("I", [1] * 16)])
def test_keys_that_are_not_bytes_are_invalid_ids(key: object) -> None:
    with pytest.raises(gts.InvalidTenantIdError):
        gts.derive_ledger_tenant_id(key, "i", "s")  # type: ignore[arg-type]
    with pytest.raises(gts.InvalidTenantIdError):
        gts.OrganizationKey(key)  # type: ignore[arg-type]


def test_organization_key_derives_like_the_functions_and_hides_the_key() -> None:
    organization = gts.OrganizationKey(KEY)
    tenant = organization.derive_ledger_tenant_id("https://idp.example", "user-1")
    assert tenant == gts.derive_ledger_tenant_id(KEY, "https://idp.example", "user-1")
    assert organization.derive_prompt_cache_partition(tenant) == gts.derive_prompt_cache_partition(KEY, tenant)
    assert repr(organization) == "OrganizationKey(<redacted>)"
    assert "0123456789abcdef" not in repr(organization) + str(organization)
    with pytest.raises(TypeError):
        pickle.dumps(organization)
    with pytest.raises(gts.InvalidTenantIdError):
        organization.derive_ledger_tenant_id("i", "\ud800")
    with pytest.raises(gts.InvalidTenantIdError):
        organization.derive_prompt_cache_partition(TENANT + "\n")


def test_lease_key_for() -> None:
    assert gts.lease_key_for("acme", TENANT) == f"acme/{TENANT}"
    with pytest.raises(gts.InvalidTenantIdError):
        gts.lease_key_for("acme", "t-x")
    with pytest.raises(gts.InvalidTenantIdError):
        gts.lease_key_for("../etc", TENANT)


TAIL = f"orgs/acme/tenants/{TENANT}"


@pytest.mark.parametrize(
    ("root", "resolved"),
    [
        # What Node's path.resolve answers for each root, worked out by hand.
        ("a/./b/../c", "{cwd}/a/c"),
        ("//x//y/", "/x/y"),
        ("", "{cwd}"),
        ("rel", "{cwd}/rel"),
        ("/..", "/"),
        ("/srv/state/../state2/.", "/srv/state2"),
    ],
)
def test_tenant_root_resolves_like_node(root: str, resolved: str) -> None:
    expected_root = resolved.format(cwd=os.getcwd())
    expected = expected_root.rstrip("/") + "/" + TAIL
    assert gts.tenant_root_for(root, "acme", TENANT) == expected


def test_tenant_root_takes_path_objects(tmp_path: Path) -> None:
    assert gts.tenant_root_for(tmp_path / "x" / "..", "acme", TENANT) == f"{tmp_path}/{TAIL}"


def test_tenant_root_checks_both_ids() -> None:
    with pytest.raises(gts.InvalidTenantIdError):
        gts.tenant_root_for("/s", "../etc", TENANT)
    with pytest.raises(gts.InvalidTenantIdError):
        gts.tenant_root_for("/s", "acme", "t-../../x")


@pytest.mark.parametrize("bad", ["/s\ud800", "/s\udfff/x", "/s\udcff", "rel\udc80"])
def test_a_state_root_that_is_not_well_formed_unicode_is_refused_as_in_node_and_c(bad: str) -> None:
    # Node refuses a lone surrogate and C takes UTF-8 only; os.fsencode's surrogateescape
    # (U+DC80..U+DCFF as raw bytes) must not open a path only Python could name.
    with pytest.raises(ValueError, match=r"^state_root must be well-formed Unicode") as raised:
        gts.tenant_root_for(bad, "acme", TENANT)
    assert not isinstance(raised.value, UnicodeError)
    assert not isinstance(raised.value, gts.TenantStateError)
    with pytest.raises(ValueError, match=r"^state_root must be well-formed Unicode"):
        gts.tenant_root_for(Path(bad), "acme", TENANT)


def test_every_path_argument_refuses_a_lone_surrogate(tmp_path: Path) -> None:
    bad = str(tmp_path / "s\udcff")
    with pytest.raises(ValueError, match=r"^path must be well-formed Unicode"):
        gts.SqliteLeaseStore(bad + ".db")
    with pytest.raises(ValueError, match=r"^path must be well-formed Unicode"):
        gts.DirectoryDurableStore(bad)
    assert not os.path.exists(os.fsencode(bad)) and not os.path.exists(os.fsencode(bad + ".db"))


def test_a_state_root_of_another_type_is_a_type_error() -> None:
    for bad in (b"/srv", 5, None):
        with pytest.raises(TypeError):
            gts.tenant_root_for(bad, "acme", TENANT)  # type: ignore[arg-type]
    # A non-ASCII but well-formed root is fine, and comes back unchanged.
    assert gts.tenant_root_for("/srv/\u00e9t\u00e9/\U0001f600", "acme", TENANT) == f"/srv/\u00e9t\u00e9/\U0001f600/{TAIL}"


def test_every_path_argument_refuses_a_nul_the_system_would_cut_at(tmp_path: Path) -> None:
    cut = tmp_path / "a"
    for call in (
        lambda: gts.tenant_root_for(f"{cut}\0b", "acme", TENANT),
        lambda: gts.SqliteLeaseStore(f"{cut}\0b.db"),
        lambda: gts.DirectoryDurableStore(f"{cut}\0b"),
        lambda: gts.open_lease_store(f"sqlite://{cut}\0b.db"),
        lambda: gts.open_durable_store(f"file://{cut}\0b"),
    ):
        with pytest.raises(ValueError, match="must not contain a NUL byte"):
            call()
    assert not cut.exists()
