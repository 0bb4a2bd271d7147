"""OpenTelemetry spans for caveat (issue 28): every use case, each recall stage, each
fact-source pull and each webhook delivery.

Spans are made through the OpenTelemetry API everywhere (``opentelemetry.trace``);
they are exported only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set: ``configure`` then installs the SDK's
tracer provider with a batching OTLP/HTTP exporter, once per process (every process
that opens a runtime calls it: a server, each worker, a CLI command). Unset, the API's
default provider makes non-recording spans and the SDK is not even imported.

Attributes are the tenant, the use case, the actor's role and counts (items returned,
candidates, samples stored): never an item's text, a query, a token or a value.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from opentelemetry import trace

__all__ = ["Recorder", "annotate", "configure", "count_of", "recorder", "traced", "tracer"]

P = ParamSpec("P")
T = TypeVar("T")

#: The tracer of caveat's application layer and doors.
tracer = trace.get_tracer("caveat")
#: Seconds an export may take, retries included, unless the operator sets one.
EXPORT_TIMEOUT_S = 2.0
_TIMEOUTS = {"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"}
#: Whether this process exports (``configure`` ran with an endpoint).
_state = {"configured": False}


def configure(environ: Mapping[str, str] = os.environ) -> bool:
    """Export spans over OTLP/HTTP when the standard endpoint variable is set; whether
    it was set up now (once per process; the exporter reads the OTEL_* variables for its
    endpoint, headers and timeout, ``OTEL_SERVICE_NAME`` names the service)."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if _state["configured"] or not endpoint:
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = environ.get("OTEL_SERVICE_NAME", "caveat")
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    # a collector that is down must not hold a one-shot command at its exit for the
    # SDK's 10 s of retries: 2 s unless the operator sets the standard timeout
    timeout = None if _TIMEOUTS & set(environ) else EXPORT_TIMEOUT_S
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(timeout=timeout)))
    trace.set_tracer_provider(provider)
    _state["configured"] = True
    return True


def count_of(result: object) -> int | None:
    """How many things a use case's answer holds, when it is a collection (or has
    ``items``), else None."""
    items = getattr(result, "items", None)
    if isinstance(items, (list, tuple)):
        return len(items)
    if isinstance(result, (list, tuple, set, frozenset, dict)):
        return len(result)
    return None


def traced(name: str, fn: Callable[P, T]) -> Callable[P, T]:
    """``fn`` (a use case taking the runtime first, usually the actor second) in a span
    ``caveat.<name>`` with the tenant, the use case, the actor's role and the answer's
    count; a refusal is recorded on the span with its reason code."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        with tracer.start_as_current_span(f"caveat.{name}") as span:
            tenant = getattr(args[0], "tenant", None) if args else None
            role = getattr(args[1], "role", None) if len(args) > 1 else None
            annotate(
                span,
                {
                    "caveat.use_case": name,
                    "caveat.tenant": tenant if isinstance(tenant, str) else None,
                    "caveat.actor.role": role if isinstance(role, str) else None,
                },
            )
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                code = getattr(exc, "code", None)
                annotate(span, {"caveat.refusal": code if isinstance(code, str) else None})
                raise
            annotate(span, {"caveat.count": count_of(result)})
            return result

    return run


def annotate(span: Any, values: Mapping[str, str | int | float | bool | None]) -> None:
    """Set the non-None ``values`` on ``span`` when it records."""
    if span.is_recording():
        for key, value in values.items():
            if value is not None:
                span.set_attribute(key, value)


class Recorder:
    """Spans kept in memory, for a benchmark or a test: the process's tracer provider
    (installed by ``recorder``) records only inside ``recording()``; outside it, its
    sampler drops every span (non-recording spans, as with no provider)."""

    def __init__(self) -> None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
        from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

        recorder = self

        class Switch(Sampler):
            def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
                on = recorder.on
                return SamplingResult(Decision.RECORD_AND_SAMPLE if on else Decision.DROP)

            def get_description(self) -> str:
                return "caveat.Recorder"

        self.on = False
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(sampler=Switch())
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @contextmanager
    def recording(self) -> Iterator[Any]:
        """Record spans until the block ends; yields the in-memory exporter (cleared)."""
        self.exporter.clear()
        self.on = True
        try:
            yield self.exporter
        finally:
            self.on = False


_recorders: list[Recorder] = []


def recorder() -> Recorder:
    """The process's span recorder, installed as its tracer provider at the first call
    (``RuntimeError`` when the process already exports over OTLP: a process has one
    provider)."""
    if not _recorders:
        if _state["configured"]:
            raise RuntimeError("this process exports spans over OTLP; it cannot record them")
        made = Recorder()
        trace.set_tracer_provider(made.provider)
        _recorders.append(made)
    return _recorders[0]
