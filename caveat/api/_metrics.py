"""Prometheus metrics of the HTTP API (``prometheus_client``), one registry per app.

Under ``caveat serve --workers N`` (N > 1) each worker is a process of its own and
``PROMETHEUS_MULTIPROC_DIR`` names a directory the server made for the run:
``prometheus_client``'s multiprocess mode keeps every metric's values in files there,
and ``/metrics``, whichever worker answers it, sums them over all the workers
(``MultiProcessCollector``). The embedding queue's depth is the last value any live
worker set; the reads by server and reason are a counter each worker adds to.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from caveat import connectors
from caveat.app import ReadRoutes, TurnDone
from claims import AuditReport

__all__ = ["Metrics", "multiprocess"]


def multiprocess() -> bool:
    """Whether this process is one of several workers sharing metrics files."""
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


@dataclass
class Metrics:
    """Recall latency, refusals by reason code, transitions by the state they led to,
    the embedding queue's depth per tenant (as of the last background round), the audit
    chain's last verification per tenant, webhook deliveries by kind and outcome, and the
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
            multiprocess_mode="livemostrecent",
        )
        self.chain_ok = Gauge(
            "caveat_audit_chain_ok",
            "1 when the tenant's audit hash chain verified at its last check, 0 when it broke.",
            ["tenant"],
            registry=self.registry,
            multiprocess_mode="livemostrecent",
        )
        self.chain_checked = Gauge(
            "caveat_audit_chain_checked_timestamp_seconds",
            "When the tenant's audit hash chain was last verified (Unix time).",
            ["tenant"],
            registry=self.registry,
            multiprocess_mode="livemax",
        )
        self.hook_deliveries = Counter(
            "caveat_hook_deliveries",
            "Webhook deliveries received, by kind (alertmanager, github, cloudevents, "
            "pagerduty; other for an unknown one) and outcome: done, ignored, duplicate, "
            "or the refusal's reason code.",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.turns = Counter(
            "caveat_turns",
            "Agent turns the server-side extractor finished a step of, by outcome: done "
            "(its proposals consolidated), refused (an unusable answer, recorded as a "
            "refused proposal), retried (queued again after a back-off), failed.",
            ["outcome"],
            registry=self.registry,
        )
        self.turns_queued = Gauge(
            "caveat_turns_queued",
            "Agent turns waiting for the server-side extractor, per tenant the server has seen.",
            ["tenant"],
            registry=self.registry,
            multiprocess_mode="livemostrecent",
        )
        self.extractor_seconds = Histogram(
            "caveat_extractor_call_seconds",
            "Time the extractor's model took to answer one call (or to fail).",
            buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
            registry=self.registry,
        )
        if not multiprocess():  # in files, with every other metric, when it is
            self.registry.register(connectors.SourceMetrics())

    def chain_verified(self, tenant: str, report: AuditReport) -> None:
        """A verification of ``tenant``'s audit chain (the background's or a caller's)."""
        self.chain_ok.labels(tenant).set(1 if report.ok else 0)
        self.chain_checked.labels(tenant).set_to_current_time()

    def hook_delivered(self, kind: str, outcome: str) -> None:
        """One webhook delivery's outcome (``connectors.hook_kind`` labels its kind)."""
        self.hook_deliveries.labels(connectors.hook_kind(kind), outcome).inc()

    def turn_done(self, tenant: str, done: TurnDone) -> None:
        """One worker step over one agent turn (the background's extraction round)."""
        self.turns.labels(done.outcome).inc()
        self.extractor_seconds.observe(done.seconds)

    def watch_reads(self, routes: ReadRoutes) -> None:
        """Expose ``routes`` (the runtime's routed reads) as ``caveat_reads_total``: read
        from its running totals, or with several workers counted as each read is served
        into a counter all of them add to."""
        if not multiprocess():
            self.registry.register(_Reads(routes))
            return
        reads = Counter(
            "caveat_reads",
            _READS_HELP,
            ["served_by", "reason"],
            registry=self.registry,
        )
        routes.listeners.append(lambda server, reason: reads.labels(server, reason).inc())

    def exposition(self) -> bytes:
        """The text exposition: this app's registry, or with several workers every
        worker's metrics summed."""
        if not multiprocess():
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)


_READS_HELP = (
    "Recalls and context-guard reads, by the server that served them (primary or "
    "replica) and why (fresh; no_replica, horizon, token, not_in_recovery, "
    "replica_failed, not_found, records)."
)


class _Reads(Collector):
    def __init__(self, routes: ReadRoutes) -> None:
        self.routes = routes

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily("caveat_reads", _READS_HELP, labels=["served_by", "reason"])
        for (server, reason), n in sorted(self.routes.counts().items()):
            family.add_metric([server, reason], n)
        yield family
