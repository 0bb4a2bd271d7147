"""What the connectors count for ``/metrics``: samples by outcome, pull errors and pull
latency per tenant and source, since the process started.

The metrics are ``prometheus_client`` objects registered nowhere; ``SourceMetrics`` is
the collector an app's registry takes (``registry.register(SourceMetrics())``), so each
app (and each test's app) exposes the process's counts without a global registry.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import Counter, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from caveat.app import PullOutcome

__all__ = ["PULL_ERRORS", "PULL_SECONDS", "SAMPLES", "SourceMetrics", "count_pull"]

SAMPLES = Counter(
    "caveat_source_samples",
    "Samples a fact source's pulls gave, by outcome: stored, or the refusal's reason "
    "(not_finite, label_missing, subject_unresolved, ambiguous, pointer_missing, "
    "fact_type_mismatch, ...).",
    ["tenant", "source", "outcome"],
    registry=None,
)
PULL_ERRORS = Counter(
    "caveat_source_pull_errors",
    "Pulls of a fact source that met an error (down, timed out, an error answer, "
    "garbage), refreshes included.",
    ["tenant", "source"],
    registry=None,
)
PULL_SECONDS = Histogram(
    "caveat_source_pull_seconds",
    "Time to fetch and map one pull of a fact source (storing excluded).",
    ["tenant", "source"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
    registry=None,
)


def count_pull(tenant: str, outcome: PullOutcome) -> None:
    """Count one stored pull."""
    if outcome.stored:
        SAMPLES.labels(tenant, outcome.source, "stored").inc(len(outcome.stored))
    for code, n in outcome.refused_by_reason.items():
        SAMPLES.labels(tenant, outcome.source, code).inc(n)
    if outcome.error is not None:
        PULL_ERRORS.labels(tenant, outcome.source).inc()
    PULL_SECONDS.labels(tenant, outcome.source).observe(outcome.latency_ms / 1000)


class SourceMetrics(Collector):
    """The connectors' metrics, for an app's registry."""

    def collect(self) -> Iterator[Metric]:
        for metric in (SAMPLES, PULL_ERRORS, PULL_SECONDS):
            yield from metric.collect()
