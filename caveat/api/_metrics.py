"""Prometheus metrics of the HTTP API (``prometheus_client``), one registry per app."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics"]


@dataclass
class Metrics:
    """Recall latency, refusals by reason code, transitions by the state they led to,
    and the embedding queue's depth per tenant (as of the last background round)."""

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
