#!/usr/bin/env python3
"""Turns the shared vectors (tests/vectors/*.json) into C tables for vectors_test.c.

Every string becomes bytes + length, with \\xHH escapes for anything not printable, so any
byte (NUL included) reaches the library exactly. A lone UTF-16 surrogate, which a C host
cannot hold in a well-formed string, becomes its three-byte encoding (ED A0 80 for U+D800):
the bytes a C caller would pass, which must be refused as an invalid id just as the
surrogate is.

    python3 tests/c/vectors_to_c.py OUT_FILE
"""
import json
import sys
from pathlib import Path

VECTORS = Path(__file__).resolve().parent.parent / "vectors"


def c_literal(data: bytes) -> str:
    """A C string literal of any bytes: printable ASCII as itself, the rest as \\xHH (a
    literal is split after an escape, so a following hex digit is not swallowed by it)."""
    out, escaped = ['"'], False
    for b in data:
        plain = 0x20 <= b < 0x7F and chr(b) not in '"\\?'
        if plain and escaped:
            out.append('" "')
        out.append(chr(b) if plain else f"\\x{b:02x}")
        escaped = not plain
    return "".join(out) + '"'


def c_bytes(data: bytes) -> str:
    """A C string literal and its length, as two initializers."""
    return f"{c_literal(data)}, {len(data)}"


def text(value: str) -> str:
    return c_bytes(value.encode("utf-8"))


def utf16(units: list) -> str:
    raw = b"".join(u.to_bytes(2, "little") for u in units)
    return c_bytes(raw.decode("utf-16-le", errors="surrogatepass").encode("utf-8", errors="surrogatepass"))


def literal(value: str) -> str:
    return c_literal(value.encode("utf-8"))


def optional(value) -> str:
    return "NULL" if value is None else literal(value)


def id_tables(ids: dict) -> list:
    out = ["static const DeriveVector derive_vectors[] = {"]
    for case in ids["derive"] + ids["derive_utf16"]:
        key = bytes.fromhex(case["key_hex"])
        issuer = utf16(case["issuer_utf16"]) if "issuer_utf16" in case else text(case["issuer"])
        subject = utf16(case["subject_utf16"]) if "subject_utf16" in case else text(case["subject"])
        expect = case["expect"]
        out.append(
            f"    {{{literal(case['note'])}, {c_bytes(key)}, {issuer}, {subject}, "
            f"{optional(expect.get('ledger_tenant_id'))}, {optional(expect.get('prompt_cache_partition'))}, "
            f"{optional(expect.get('error'))}}},"
        )
    out.append("};")
    out.append("static const ValidityVector validity_vectors[] = {")
    for kind, cases in (("ORG", ids["organization_ids"]), ("TENANT", ids["ledger_tenant_ids"]),
                        ("PARTITION", ids["prompt_cache_partitions"])):
        for case in cases:
            out.append(f"    {{KIND_{kind}, {text(case['value'])}, {int(case['valid'])}}},")
    out.append("};")
    out.append("static const PathVector path_vectors[] = {")
    for case in ids["lease_keys"]:
        expect = case["expect"]
        out.append(f"    {{NULL, 0, {text(case['org'])}, {text(case['tenant'])}, "
                   f"{optional(expect if isinstance(expect, str) else None)}, "
                   f"{optional(expect.get('error') if isinstance(expect, dict) else None)}}},")
    for case in ids["tenant_roots"]:
        expect = case["expect"]
        out.append(f"    {{{text(case['state_root'])}, {text(case['org'])}, {text(case['tenant'])}, "
                   f"{optional(expect if isinstance(expect, str) else None)}, "
                   f"{optional(expect.get('error') if isinstance(expect, dict) else None)}}},")
    out.append("};")
    return out


# The record a step does not check (record_expect 2).
NOT_CHECKED = "2, {NULL, 0, NULL, 0, 0, 0, 0}"


def record(value) -> str:
    """record_expect and the record: 0 and nothing for null, 1 and the record otherwise."""
    if value is None:
        return "0, {NULL, 0, NULL, 0, 0, 0, 0}"
    return (f"1, {{{text(value['key'])}, {text(value['owner'])}, {value['epoch']}, "
            f"{value['lease_until_ms']}, {value['forgotten_at_epoch']}}}")


def store_tables(scenarios: list) -> list:
    steps, history, table = [], [], []
    for scenario in scenarios:
        first = len(steps)
        for step in scenario["steps"]:
            if "advance_ms" in step:
                steps.append(f"    {{NULL, {step['advance_ms']}, NULL, 0, NULL, 0, 0, 0, NULL, 0, 0, "
                             "0, {NULL, 0, NULL, 0, 0, 0, 0}, -1, 0},")
                continue
            expect = step["expect"]
            key = text(step["key"]) if "key" in step else "NULL, 0"
            owner = text(step["owner"]) if "owner" in step else "NULL, 0"
            has_record = "record" in expect
            history_first, history_count = -1, 0
            if "history" in expect:
                history_first, history_count = len(history), len(expect["history"])
                for entry in expect["history"]:
                    history.append(f"    {{{text(entry['key'])}, {literal(entry['op'])}, {text(entry['owner'])}, "
                                   f"{entry['epoch']}, {entry['at_ms']}}},")
            steps.append(
                f"    {{{literal(step['call'])}, 0, {key}, {owner}, {step.get('epoch', 0)}, {step.get('ttl_ms', 0)}, "
                f"{optional(expect.get('error'))}, {int('ttl_ms' in expect)}, {expect.get('ttl_ms', 0)}, "
                f"{record(expect.get('record')) if has_record else NOT_CHECKED}, "
                f"{history_first}, {history_count}}},"
            )
        table.append(f"    {{{literal(scenario['name'])}, {scenario['start_ms']}, {first}, {len(steps) - first}}},")
    return (["static const HistoryVector history_vectors[] = {"] + (history or ["    {NULL, 0, NULL, NULL, 0, 0, 0}"])
            + ["};", "static const StepVector step_vectors[] = {"] + steps
            + ["};", "static const ScenarioVector scenario_vectors[] = {"] + table + ["};"])


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    ids = json.loads((VECTORS / "ids.json").read_text())
    scenarios = json.loads((VECTORS / "store-scenarios.json").read_text())
    lines = ["/* Generated by tests/c/vectors_to_c.py from tests/vectors; do not edit. */"]
    lines += id_tables(ids) + store_tables(scenarios)
    Path(sys.argv[1]).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
