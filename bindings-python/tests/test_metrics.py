"""The core's metrics through the module: lease operations on a real SQLite store, read back
with ``prometheus_client``'s parser from ``metrics()`` and from a ``prometheus_client`` registry
that serves ours beside the host's own. The counters are the process's, so each test compares
readings taken before and after."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

import gotry_tenant_state as gts

ACQUIRE = ("gotry_tenant_lease_operations_total", {"store": "sqlite", "op": "acquire"})
TIMED = ("gotry_tenant_store_operation_duration_seconds_count", {"store": "sqlite", "op": "acquire"})

Series = tuple[str, dict[str, str]]


def value(text: str, name: str, labels: dict[str, str]) -> float:
    """The value of one sample, found by prometheus_client's parser; 0 when it is absent."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0


def deltas(before: str, after: str, series: list[Series]) -> list[float]:
    return [value(after, name, labels) - value(before, name, labels) for name, labels in series]


def grant_and_refuse(store: gts.SqliteLeaseStore, key: str) -> None:
    store.acquire(key, "a", 5000)
    with pytest.raises(gts.LeaseHeldError):
        store.acquire(key, "b", 5000)


SERIES: list[Series] = [
    (ACQUIRE[0], {**ACQUIRE[1], "outcome": "granted"}),
    (ACQUIRE[0], {**ACQUIRE[1], "outcome": "held"}),
    TIMED,
]


def test_metrics_counts_a_granted_and_a_held_acquire(store: gts.SqliteLeaseStore) -> None:
    before = gts.metrics()
    grant_and_refuse(store, "metrics/text")
    after = gts.metrics()
    assert deltas(before, after, SERIES) == [1.0, 1.0, 2.0]
    assert gts.METRICS_CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
    kinds = {family.name: family.type for family in text_string_to_metric_families(after)}
    # The parser names a counter family without its `_total`, as OpenMetrics does.
    assert kinds["gotry_tenant_lease_operations"] == "counter"
    assert kinds["gotry_tenant_store_operation_duration_seconds"] == "histogram"
    assert kinds["gotry_tenant_router_tenants"] == "gauge"


def test_a_prometheus_client_registry_serves_ours_beside_the_hosts(store: gts.SqliteLeaseStore) -> None:
    registry = CollectorRegistry()
    Counter("host_requests", "The host's own.", registry=registry).inc(3)
    registry.register(gts.MetricsCollector())
    before = generate_latest(registry).decode()
    grant_and_refuse(store, "metrics/registry")
    after = generate_latest(registry).decode()
    assert value(after, "host_requests_total", {}) == 3.0
    assert deltas(before, after, SERIES) == [1.0, 1.0, 2.0]
    # Every family of ours is served, with its help and type.
    ours = {f.name for f in text_string_to_metric_families(gts.metrics())}
    served = {f.name for f in text_string_to_metric_families(after)}
    assert ours <= served and len(ours) >= 15
    # A name registered twice is refused by the registry, as for any collector.
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(gts.MetricsCollector())
    # The same registry in OpenMetrics, read back with the OpenMetrics parser (whose
    # functions prometheus_client leaves unannotated).
    open_text = generate_openmetrics(registry).decode()  # type: ignore[no-untyped-call]
    assert open_text.endswith("# EOF\n")
    families = parse_openmetrics(open_text)  # type: ignore[no-untyped-call]
    lost = [f for f in families if f.name == "gotry_tenant_leases_lost"]
    assert len(lost) == 1 and lost[0].type == "counter"


# ---- per-tenant series: TenantRouter(..., tenant_metrics=True) ----

ORG = "acme"
T1 = "t-0123456789abcdef0123456789abcdef"
T2 = "t-11111111111111111111111111111111"
# A replica id holds any text: the parser reads its quote and backslash back unescaped.
REPLICA = 'replica "py" \\ 1'


def router_on(
    tmp_path: Path, replica: str, clock: gts.ManualClock, tenant_metrics: bool | None = None
) -> gts.TenantRouter:
    """A router with no thread of its own on `clock`, its stores under `tmp_path`."""
    return gts.TenantRouter(
        gts.SqliteLeaseStore(tmp_path / "leases.db"),
        gts.DirectoryDurableStore(tmp_path / "durable"),
        tmp_path / "state",
        replica,
        3000,
        500,
        clock=clock,
        start_thread=False,
        copy_interval_ms=3_600_000,
        tenant_metrics=tenant_metrics,
    )


def tenant_samples(text: str) -> dict[tuple[str, str], float]:
    """Every per-tenant sample of the text, by (name, tenant), read with prometheus_client's
    parser; the state's name is folded into the sample's name."""
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "tenant" in sample.labels:
                assert sample.labels["replica"] == REPLICA, sample
                state = sample.labels.get("state")
                name = sample.name if state is None else f"{sample.name}:{state}"
                found[(name, sample.labels["tenant"])] = float(sample.value)
    return found


def write(handle: gts.TenantHandle) -> None:
    (Path(handle.root) / "notes.txt").write_text("x")


def test_a_router_with_tenant_metrics_shows_each_tenant_until_it_leaves(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    registry.register(gts.MetricsCollector())
    clock = gts.ManualClock(0)
    router = router_on(tmp_path, REPLICA, clock, tenant_metrics=True)
    one, two = gts.lease_key_for(ORG, T1), gts.lease_key_for(ORG, T2)
    router.open(ORG, T1)
    router.open(ORG, T2)
    router.run(one, write)
    router.run(one, write)

    def scrape(handle: gts.TenantHandle) -> dict[tuple[str, str], float]:
        # Read while this call of the tenant is in flight.
        clock.advance(1500)
        return tenant_samples(generate_latest(registry).decode())

    seen = router.run(one, scrape)
    assert seen == {
        ("gotry_tenant_router_tenant_state:serving", one): 1.0,
        ("gotry_tenant_router_tenant_state:serving", two): 1.0,
        ("gotry_tenant_router_tenant_calls_in_flight", one): 1.0,
        ("gotry_tenant_router_tenant_calls_in_flight", two): 0.0,
        ("gotry_tenant_router_tenant_copy_lag_seconds", one): 1.5,
        ("gotry_tenant_router_tenant_copy_lag_seconds", two): 0.0,
        ("gotry_tenant_router_tenant_copy_lag_writes", one): 2.0,
        ("gotry_tenant_router_tenant_copy_lag_writes", two): 0.0,
    }
    router.handoff(two, timeout_ms=1000)
    assert {tenant for _, tenant in tenant_samples(gts.metrics())} == {one}
    router.close(timeout_ms=1000)
    assert tenant_samples(generate_latest(registry).decode()) == {}


def test_without_tenant_metrics_no_series_names_a_tenant(tmp_path: Path) -> None:
    router = router_on(tmp_path, "replica-py-plain", gts.ManualClock(0))
    router.open(ORG, T1)
    text = router.run(gts.lease_key_for(ORG, T1), lambda handle: gts.metrics())
    assert value(text, "gotry_tenant_router_tenants", {"state": "serving"}) >= 1.0
    assert 'tenant="' not in text
    router.close(timeout_ms=1000)
    with pytest.raises(TypeError):
        router_on(tmp_path, "replica-py-bad", gts.ManualClock(0), tenant_metrics=1)  # type: ignore[arg-type]


def test_promtool_finds_no_problem_in_the_text_with_tenant_series(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("no promtool on PATH (Debian's prometheus package): the text is not linted")
    router = router_on(tmp_path, REPLICA, gts.ManualClock(0), tenant_metrics=True)
    router.open(ORG, T1)
    router.run(gts.lease_key_for(ORG, T1), write)
    text = gts.metrics()
    router.close(timeout_ms=1000)
    assert 'tenant="' in text
    checked = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    said = checked.stdout + checked.stderr
    assert checked.returncode == 0 and said.strip() == "", f"promtool: {said}\n{text}"
