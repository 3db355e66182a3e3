"""The core's metrics in a ``prometheus_client`` registry.

The numbers are counted and written by the core; ``prometheus_client``'s own parser turns the
text into the metric families its registry collects, so a host's ``/metrics`` serves ours
beside its own, in whichever format it negotiates.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ._native import metrics

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric


class MetricsCollector:
    """A ``prometheus_client`` collector of every family of this process's core.

    ``REGISTRY.register(MetricsCollector())`` (or any ``CollectorRegistry``): each scrape reads
    the core's counters once. ``prometheus_client`` is needed only once this is collected.
    """

    def describe(self) -> Iterator[Metric]:
        """Our families, so that a registry refuses a host metric of the same name when this
        is registered (the family set is fixed; only the values change)."""
        return self.collect()

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.parser import text_string_to_metric_families

        yield from text_string_to_metric_families(metrics())
