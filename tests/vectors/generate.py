#!/usr/bin/env python3
"""Writes the shared test vectors that every language's suite reads.

The expected values come from this file alone, not from the core: tenant ids from Python's
own hmac and hashlib, store outcomes from the small model of the lease rules below. Run it
after changing a case; a test then compares the committed JSON with a fresh run.

    python3 tests/vectors/generate.py          # rewrite ids.json and store-scenarios.json
    python3 tests/vectors/generate.py --check  # exit 1 when the committed files differ
"""
import hashlib
import hmac
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONTEXT = b"gotry/prompt-cache-partition/v1"
ID_INVALID = "GOTRY_TENANT_ID_INVALID"


def ledger_id(key: bytes, issuer: str, subject: str) -> str:
    message = issuer.encode("utf-8") + b"\0" + subject.encode("utf-8")
    return "t-" + hmac.new(key, message, hashlib.sha256).hexdigest()[:32]


def partition(key: bytes, tenant: str) -> str:
    return "pc-" + hmac.new(key, CONTEXT + b"\0" + tenant.encode(), hashlib.sha256).hexdigest()[:32]


def id_vectors() -> dict:
    key_a = bytes(range(32))
    key_b = b"k" * 48
    derive = []

    def ok(key: bytes, issuer: str, subject: str, note: str) -> None:
        tenant = ledger_id(key, issuer, subject)
        derive.append({"note": note, "key_hex": key.hex(), "issuer": issuer, "subject": subject,
                       "expect": {"ledger_tenant_id": tenant, "prompt_cache_partition": partition(key, tenant)}})

    def refused(key: bytes, issuer, subject, note: str) -> None:
        case = {"note": note, "key_hex": key.hex(), "issuer": issuer, "subject": subject,
                "expect": {"error": ID_INVALID}}
        derive.append(case)

    ok(key_a, "https://idp.example", "user-1", "plain ASCII claims")
    ok(key_b, "https://idp.example", "user-1", "another key gives another tenant")
    ok(key_a, "https://idp.example", "user-2", "another subject gives another tenant")
    ok(key_a, "i", "\u00e9", "composed e-acute")
    ok(key_a, "i", "e\u0301", "decomposed e-acute: no normalization, another tenant")
    ok(key_a, "i", "a\ufffd", "U+FFFD itself is a valid claim")
    ok(key_a, "iss", "\U0001F600" * 128, "512 UTF-8 bytes of emoji")
    ok(key_a, "a" * 512, "s", "512-byte issuer")
    ok(key_a, "i\u200b", "s", "zero-width space is kept")
    refused(key_a, "", "s", "empty issuer")
    refused(key_a, "i", "", "empty subject")
    refused(key_a, "i\u0000x", "s", "NUL in the issuer")
    refused(key_a, "i", "s\u0000", "NUL in the subject")
    refused(key_a, "a" * 513, "s", "513-byte issuer")
    refused(key_a, "i", "\u00e9" * 256 + "a", "513 UTF-8 bytes of subject")
    refused(bytes(31), "i", "s", "31-byte key")
    refused(b"", "i", "s", "empty key")
    # A lone surrogate cannot be written in JSON text that every parser accepts, so it is
    # named by its UTF-16 code units; each binding builds the host string from them.
    surrogates = [
        {"note": "lone high surrogate at the end", "key_hex": key_a.hex(), "issuer": "i", "subject_utf16": [0x61, 0xD800],
         "expect": {"error": ID_INVALID}},
        {"note": "lone low surrogate at the start", "key_hex": key_a.hex(), "issuer_utf16": [0xDC00, 0x61], "subject": "s",
         "expect": {"error": ID_INVALID}},
    ]
    organization_ids = [
        {"value": v, "valid": True} for v in ["acme", "a", "0", "a-b", "a" * 63, "9lives"]
    ] + [
        {"value": v, "valid": False} for v in ["acme\n", "Acme", "a" * 64, "-acme", "", "ac me", "acm\u00e9", "a_b", "a/b", "..", "\nacme"]
    ]
    tenant = ledger_id(key_a, "https://idp.example", "user-1")
    ledger_tenant_ids = [
        {"value": tenant, "valid": True},
        {"value": "t-" + "0" * 32, "valid": True},
    ] + [
        {"value": v, "valid": False} for v in [tenant + "\n", tenant.upper(), "t-" + "0" * 31, "t-" + "0" * 33, "t-" + "g" * 32, "x" + tenant, "", "pc-" + "0" * 32]
    ]
    partitions = [
        {"value": partition(key_a, tenant), "valid": True},
    ] + [
        {"value": v, "valid": False} for v in ["pc-" + "0" * 32 + "\n", "pc-" + "A" * 32, tenant, "pc-" + "0" * 31]
    ]
    roots = [
        {"state_root": "/srv/state", "org": "acme", "tenant": tenant, "expect": f"/srv/state/orgs/acme/tenants/{tenant}"},
        {"state_root": "//x//y/", "org": "acme", "tenant": tenant, "expect": f"/x/y/orgs/acme/tenants/{tenant}"},
        {"state_root": "/a/./b/../c", "org": "acme", "tenant": tenant, "expect": f"/a/c/orgs/acme/tenants/{tenant}"},
        {"state_root": "/..", "org": "acme", "tenant": tenant, "expect": f"/orgs/acme/tenants/{tenant}"},
        {"state_root": "/s", "org": "../etc", "tenant": tenant, "expect": {"error": ID_INVALID}},
        {"state_root": "/s", "org": "acme", "tenant": "t-../../etc", "expect": {"error": ID_INVALID}},
    ]
    return {
        "derive": derive,
        "derive_utf16": surrogates,
        "organization_ids": organization_ids,
        "ledger_tenant_ids": ledger_tenant_ids,
        "prompt_cache_partitions": partitions,
        "lease_keys": [
            {"org": "acme", "tenant": tenant, "expect": f"acme/{tenant}"},
            {"org": "Acme", "tenant": tenant, "expect": {"error": ID_INVALID}},
            {"org": "acme", "tenant": "t-1", "expect": {"error": ID_INVALID}},
        ],
        "tenant_roots": roots,
    }


INVALID = "INVALID_ARGUMENT"


class Model:
    """The lease rules, written again from the specification, independently of the core."""

    def __init__(self, now: int):
        self.now = now
        self.rows: dict = {}
        self.log: list = []

    def call(self, step: dict) -> dict:
        op = step["call"]
        key = step.get("key")
        if op == "history":
            entries = [e for e in self.log if key is None or e["key"] == key]
            return {"history": entries}
        for name in ("key", "owner"):
            if name in step and not (1 <= len(step[name].encode("utf-16-le")) // 2 <= 200):
                return {"error": INVALID}
        if "ttl_ms" in step and not (isinstance(step["ttl_ms"], int) and 100 <= step["ttl_ms"] <= 600_000):
            return {"error": INVALID}
        if "epoch" in step and not (isinstance(step["epoch"], int) and step["epoch"] >= 1):
            return {"error": INVALID}
        row = self.rows.get(key)
        if op == "read":
            return {"record": dict(row) if row else None}
        owner = step["owner"]
        if op == "acquire":
            if row and row["lease_until_ms"] > self.now:
                return {"error": "GOTRY_TENANT_LEASE_HELD", "record": dict(row)}
            new = {"key": key, "owner": owner, "epoch": row["epoch"] + 1 if row else 1,
                   "lease_until_ms": self.now + step["ttl_ms"],
                   "forgotten_at_epoch": row["forgotten_at_epoch"] if row else 0}
            return self.grant(op, new, step["ttl_ms"])
        epoch = step["epoch"]
        if not row or row["owner"] != owner or row["epoch"] != epoch:
            return {"error": "GOTRY_TENANT_LEASE_LOST"}
        if op == "release":
            return self.grant(op, dict(row, lease_until_ms=min(row["lease_until_ms"], self.now)), None)
        if row["lease_until_ms"] <= self.now:
            return {"error": "GOTRY_TENANT_LEASE_LOST"}
        if op == "renew":
            return self.grant(op, dict(row, lease_until_ms=self.now + step["ttl_ms"]), step["ttl_ms"])
        if op == "mark_forgotten":
            return self.grant("forget", dict(row, forgotten_at_epoch=max(row["forgotten_at_epoch"], epoch)), None)
        raise ValueError(op)

    def grant(self, op: str, new: dict, ttl_ms) -> dict:
        self.rows[new["key"]] = new
        self.log.append({"key": new["key"], "op": op, "owner": new["owner"], "epoch": new["epoch"], "at_ms": self.now})
        return {"record": dict(new), "ttl_ms": ttl_ms} if ttl_ms is not None else {"record": dict(new)}


def scenario(name: str, steps: list, start_ms: int = 1_000_000) -> dict:
    model = Model(start_ms)
    out = []
    for step in steps:
        if "advance_ms" in step:
            model.now += step["advance_ms"]
            out.append(step)
        else:
            out.append(dict(step, expect=model.call(step)))
    return {"name": name, "start_ms": start_ms, "steps": out}


def acq(key, owner, ttl=1000):
    return {"call": "acquire", "key": key, "owner": owner, "ttl_ms": ttl}


def ren(key, owner, epoch, ttl=1000):
    return {"call": "renew", "key": key, "owner": owner, "epoch": epoch, "ttl_ms": ttl}


def rel(key, owner, epoch):
    return {"call": "release", "key": key, "owner": owner, "epoch": epoch}


def forget(key, owner, epoch):
    return {"call": "mark_forgotten", "key": key, "owner": owner, "epoch": epoch}


def read(key):
    return {"call": "read", "key": key}


def hist(key=None):
    return {"call": "history", "key": key} if key is not None else {"call": "history"}


def wait(ms):
    return {"advance_ms": ms}


def store_scenarios() -> list:
    k = "acme/t-" + "0" * 32
    return [
        scenario("first acquire starts at epoch 1", [read(k), acq(k, "a"), read(k), hist(k)]),
        scenario("the holder acquiring again is refused with the record", [acq(k, "a"), wait(10), acq(k, "a"), acq(k, "b")]),
        scenario("acquire exactly at lease_until_ms succeeds", [acq(k, "a"), wait(999), acq(k, "b"), wait(1), acq(k, "b"), hist(k)]),
        scenario("renew keeps the epoch and extends", [acq(k, "a"), wait(500), ren(k, "a", 1), wait(900), ren(k, "a", 1, 2000), read(k)]),
        scenario("renew after expiry is lost", [acq(k, "a"), wait(1000), ren(k, "a", 1), wait(5), ren(k, "a", 1)]),
        scenario("renew by another owner or epoch is lost", [acq(k, "a"), ren(k, "b", 1), ren(k, "a", 2), ren("other", "a", 1)]),
        scenario("release after expiry and twice", [acq(k, "a"), wait(1500), rel(k, "a", 1), rel(k, "a", 1), read(k), hist(k)]),
        scenario("release expires at once and the next owner starts", [acq(k, "a"), wait(100), rel(k, "a", 1), acq(k, "b"), rel(k, "a", 1), ren(k, "a", 1), hist(k)]),
        scenario("a stale holder's release is lost", [acq(k, "a"), wait(1000), acq(k, "b"), rel(k, "a", 1), read(k)]),
        scenario("the forgotten floor survives the next acquire", [acq(k, "a"), forget(k, "a", 1), wait(1000), acq(k, "b"), read(k), forget(k, "b", 2), wait(1000), forget(k, "b", 2), acq(k, "c"), read(k)]),
        scenario("epochs rise by one per acquire", [acq(k, "a"), wait(1000), acq(k, "a"), wait(1000), acq(k, "b"), wait(1000), acq(k, "a"), hist()]),
        scenario("keys are independent", [acq(k, "a"), acq("other", "b"), read("other"), hist("other")]),
        scenario("argument bounds", [
            acq(k, "a", 99), acq(k, "a", 600_001), acq(k, "a", 100), wait(100), acq(k, "a", 600_000),
            acq("", "a"), acq(k, ""), acq(k, "\U0001F600" * 101), acq("x" * 201, "a"),
            ren(k, "a", 0), rel(k, "a", -1), forget(k, "a", 0), read(""),
        ]),
        scenario("text is counted in UTF-16 code units", [
            acq("k1", "\U0001F600" * 100), acq("k2", "\u00e9" * 200), acq("\U0001F600" * 100, "o"), read("\U0001F600" * 100),
        ]),
    ]


def render(value) -> str:
    return json.dumps(value, indent=1, ensure_ascii=True) + "\n"


def main() -> int:
    outputs = {HERE / "ids.json": render(id_vectors()), HERE / "store-scenarios.json": render(store_scenarios())}
    if "--check" in sys.argv:
        stale = [p.name for p, text in outputs.items() if not p.exists() or p.read_text() != text]
        if stale:
            print("stale vectors, run tests/vectors/generate.py:", ", ".join(stale))
            return 1
        return 0
    for path, text in outputs.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
