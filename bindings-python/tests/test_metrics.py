"""The core's metrics through the module: lease operations on a real SQLite store, read back
with ``prometheus_client``'s parser from ``metrics()`` and from a ``prometheus_client`` registry
that serves ours beside the host's own. The counters are the process's, so each test compares
readings taken before and after."""

from __future__ import annotations

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
