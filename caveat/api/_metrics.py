"""Prometheus metrics of the HTTP API (``prometheus_client``), one registry per app."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from caveat import connectors
from caveat.app import ReadRoutes

__all__ = ["Metrics"]


@dataclass
class Metrics:
    """Recall latency, refusals by reason code, transitions by the state they led to,
    the embedding queue's depth per tenant (as of the last background round), and the
    connectors' counts of this process's pulls (``connectors.SourceMetrics``: samples
    stored and refused by reason, errors, latency, per tenant and source)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.recall_seconds = Histogram(
            "caveat_recall_seconds",
            "Time to answer a recall (GET /v1/recall), gates and ranking included.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=self.registry,
        )
        self.refusals = Counter(
            "caveat_refusals",
            "Refusals answered, by reason code (write-gate refusals inside a batch included).",
            ["code"],
            registry=self.registry,
        )
        self.transitions = Counter(
            "caveat_transitions",
            "Lifecycle transitions made through the API, by the state they led to.",
            ["state"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "caveat_embed_queue_depth",
            "Items waiting for an embedding, per tenant the server has seen.",
            ["tenant"],
            registry=self.registry,
        )

        self.registry.register(connectors.SourceMetrics())

    def watch_reads(self, routes: ReadRoutes) -> None:
        """Expose ``routes`` (the runtime's routed reads) as ``caveat_reads_total``."""
        self.registry.register(_Reads(routes))


class _Reads(Collector):
    def __init__(self, routes: ReadRoutes) -> None:
        self.routes = routes

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "caveat_reads",
            "Recalls and context-guard reads, by the server that served them (primary or "
            "replica) and why (fresh; no_replica, horizon, token, not_in_recovery, "
            "replica_failed, not_found, records).",
            labels=["served_by", "reason"],
        )
        for (server, reason), n in sorted(self.routes.counts().items()):
            family.add_metric([server, reason], n)
        yield family
