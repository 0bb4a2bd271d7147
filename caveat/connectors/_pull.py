"""Pulls and refreshes: fetch from the tenant's sources, map, then one ``store_pull`` per
source (architecture.md, "The edge": fetch first, outside any transaction; then one
use-case call).

Every fetch of a pull (a Prometheus query per attribute, a GET or a file read per
subject) runs on a small thread pool of the process, so one source's attributes, and
several sources, are fetched at once. Threads rather than asyncio: a pull is called
from the server's background round, the CLI, and recall doors some of which run inside
an event loop (the MCP server's), and a blocking ``httpx.Client`` on a pool works the
same from all of them, with no loop to start or to nest. A thread cannot be killed, so
the deadline is kept twice: every call's timeout is at most the time left, and the
pull stops waiting at the deadline and discards what comes later.

A source that is down, slow, or answers garbage never raises: what it would have
answered is not stored (UNKNOWN for the gate), its error goes into the source's
status and ``/metrics``, and the other sources and attributes still count.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta

import factgen
from caveat._tracing import annotate, tracer
from caveat.app import PullOutcome, Runtime, pull_frame, store_pull
from caveat.connectors import file, http_json, prometheus
from caveat.connectors._counters import count_pull
from caveat.connectors._http import Transport, transport
from caveat.connectors._map import Part, settle
from predicates.errors import CaveatError, NotFound

__all__ = ["RefreshReport", "SourceFailure", "pull_sources", "refresh"]

#: How many fetches the process runs at once.
WORKERS = 16
#: How much longer than a refresh's deadline its calls may take (then they are dropped).
_GRACE = timedelta(milliseconds=50)
#: How much longer than its longest source timeout a pull waits for its fetches.
_SLACK = timedelta(seconds=1)
#: The most errors of one pull named in its status (the rest are counted).
_SHOWN = 3

Wanted = Mapping[str, frozenset[str]]
Fetch = Callable[[float], Part]
Fetches = Callable[
    [factgen.SourceSpec, factgen.World, Wanted | None, Transport, datetime | None],
    list[tuple[tuple[str, ...], Fetch]],
]
_KINDS: dict[str, Fetches] = {
    "prometheus": prometheus.fetches,
    "http_json": http_json.fetches,
    "file": file.fetches,
}


@dataclass(frozen=True)
class SourceFailure:
    """A source that failed a refresh (or part of it): its name, its error, and the
    attributes it would have answered."""

    source: str
    error: str
    attributes: tuple[str, ...]


@dataclass(frozen=True)
class RefreshReport:
    """What a refresh did: one outcome per source it pulled (stored, refused, error), the
    sources that failed or timed out, and the needs no source answers."""

    outcomes: tuple[PullOutcome, ...]
    failures: tuple[SourceFailure, ...]
    skipped: tuple[tuple[str, str], ...]


@functools.cache
def _executor() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="caveat-pull")


def _ms(td: timedelta) -> str:
    return f"{round(td.total_seconds() * 1000)} ms"


@dataclass
class _Job:
    spec: factgen.SourceSpec
    fetches: list[tuple[tuple[str, ...], Fetch]]
    started: float = 0.0


@dataclass(frozen=True)
class _Result:
    observations: list[factgen.Observation]
    refused: list[factgen.Refusal]
    error: str | None
    failed: tuple[str, ...]
    latency_ms: float


def _timed(fetch: Fetch, timeout: float) -> tuple[Part, float]:
    part = fetch(timeout)
    return part, time.monotonic()


def _wanted_only(
    items: Iterable[factgen.Observation], wanted: Wanted | None
) -> list[factgen.Observation]:
    if wanted is None:
        return list(items)
    return [o for o in items if o.subject in wanted.get(o.attribute, ())]


def _run(
    jobs: Sequence[_Job],
    *,
    wanted: Mapping[str, Wanted] | None,
    deadline: timedelta | None,
) -> list[_Result]:
    """Run every job's fetches at once; wait for all of them, or until ``deadline``."""
    pool = _executor()
    started = time.monotonic()
    futures: list[list[Future[tuple[Part, float]]]] = []
    for job in jobs:
        timeout = job.spec.timeout
        if deadline is not None and timeout >= deadline:
            # a call outlives the deadline by a grace only, so that the deadline (one
            # message: "timed out after 500 ms") and not the call's own timeout ends it
            timeout = deadline + _GRACE
        seconds = timeout.total_seconds()
        futures.append([pool.submit(_timed, fetch, seconds) for _, fetch in job.fetches])
    every = [f for fs in futures for f in fs]
    if deadline is None:
        # a pull: each call has its source's timeout (per phase: a server that trickles
        # its answer could hold one longer), so the wait has a bound of its own too
        longest = max((job.spec.timeout for job in jobs), default=timedelta(0))
        wait(every, timeout=(longest + _SLACK).total_seconds())
    else:
        wait(every, timeout=deadline.total_seconds())
    results = []
    for job, fs in zip(jobs, futures, strict=True):
        late = f"timed out after {_ms(deadline or job.spec.timeout)}"
        merged = Part()
        finished = started
        for (attributes, _), future in zip(job.fetches, fs, strict=True):
            if not future.done():
                future.cancel()  # a fetch past the deadline: its answer is discarded
                merged.error(attributes, late)
                finished = max(finished, time.monotonic())
                continue
            try:
                part, at = future.result()
            except Exception as exc:  # a fetch never raises; if one did, it is an error
                merged.error(attributes, f"{type(exc).__name__}: {exc}")
                continue
            merged.extend(part)
            finished = max(finished, at)
        kept, refused = settle(merged.candidates, merged.refused)
        mine = None if wanted is None else wanted.get(job.spec.name, {})
        refused = [r for r in refused if mine is None or _needed(r, mine)]
        messages = list(dict.fromkeys(message for _, message in merged.errors))
        if messages and all(m == late for m in messages):
            error: str | None = late
        elif messages:
            more = len(messages) - _SHOWN
            error = "; ".join(messages[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")
        else:
            error = None
        failed = tuple(sorted({a for attrs, _ in merged.errors for a in attrs}))
        results.append(
            _Result(
                _wanted_only(kept, mine),
                refused,
                error,
                failed,
                (finished - started) * 1000,
            )
        )
    return results


def _needed(r: factgen.Refusal, wanted: Wanted) -> bool:
    return r.observation.subject in wanted.get(r.observation.attribute, ())


def _store(
    rt: Runtime,
    spec: factgen.SourceSpec,
    result: _Result,
    now: datetime | None,
    *,
    scheduled: bool = True,
) -> PullOutcome:
    with tracer.start_as_current_span("caveat.source.pull") as span:
        outcome = store_pull(
            rt,
            source=spec.name,
            observations=result.observations,
            refused=result.refused,
            error=result.error,
            latency_ms=result.latency_ms,
            now=now,
            scheduled=scheduled,
        )
        annotate(
            span,
            {
                "caveat.tenant": rt.tenant,
                "caveat.source": spec.name,
                "caveat.source.kind": spec.kind,
                "caveat.source.fetch_ms": round(result.latency_ms, 3),
                "caveat.source.stored": len(outcome.stored),
                "caveat.source.refused": sum(outcome.refused_by_reason.values()),
                "caveat.source.failed": outcome.error is not None,
            },
        )
    count_pull(rt.tenant, outcome)
    return outcome


def _jobs(
    specs: Iterable[factgen.SourceSpec],
    world: factgen.World,
    wanted: Mapping[str, Wanted] | None,
    client: Transport,
    now: datetime | None,
) -> list[_Job]:
    return [
        _Job(
            spec,
            _KINDS[spec.kind](
                spec, world, None if wanted is None else wanted[spec.name], client, now
            ),
        )
        for spec in specs
    ]


def pull_sources(
    rt: Runtime,
    names: Sequence[str] | None = None,
    *,
    now: datetime | None = None,
    client: Transport | None = None,
) -> list[PullOutcome]:
    """Pull the tenant's sources (all, or those named; ``NotFound`` for a name not
    declared, before anything is fetched): every attribute of each, fetched at once,
    each call within its source's ``timeout``; then one ``store_pull`` per source, in
    the order given (declared). An error of a source is its outcome's ``error``."""
    frame = pull_frame(rt)
    if names is None:
        specs = list(frame.config.sources)
    else:
        specs = []
        for name in dict.fromkeys(names):
            spec = frame.config.source(name)
            if spec is None:
                declared = ", ".join(s.name for s in frame.config.sources) or "none"
                raise NotFound(f"no source {name!r} (declared: {declared})", source=name)
            specs.append(spec)
    jobs = _jobs(specs, frame.world, None, client or transport(), now)
    results = _run(jobs, wanted=None, deadline=None)
    outcomes = []
    for job, result in zip(jobs, results, strict=True):
        try:
            outcomes.append(_store(rt, job.spec, result, now))
        except CaveatError as exc:  # that batch refused: counted as a failed pull, go on
            failed = _Result([], [], f"not stored: {exc.message}", result.failed, result.latency_ms)
            outcomes.append(_store(rt, job.spec, failed, now))
    return outcomes


def _answers(spec: factgen.SourceSpec, world: factgen.World, subject: str, attribute: str) -> bool:
    attr = next((a for a in spec.attributes if a.attribute == attribute), None)
    if attr is None:
        return False
    if spec.kind == "prometheus":
        return attr.subject is None or world.resolver.lookup(attr.subject) == subject
    return any(world.resolver.lookup(name) == subject for name in spec.subjects)


def refresh(
    rt: Runtime,
    needs: Iterable[tuple[str, str]],
    *,
    deadline: timedelta = timedelta(milliseconds=500),
    now: datetime | None = None,
    client: Transport | None = None,
) -> RefreshReport:
    """Pull what a recall needs, now: for each (canonical subject, attribute), every
    source that answers the attribute (an ``http_json`` or ``file`` source only for a
    subject it lists), all fetched at once within ``deadline``. A source that does not
    answer in time is a ``SourceFailure`` ("timed out after 500 ms") and what it sends
    later is discarded; the rest is stored, one ``store_pull`` per source, keeping
    only samples of the subjects needed. Never raises for a source's failure."""
    wanted_pairs = list(dict.fromkeys(needs))
    if not wanted_pairs:
        return RefreshReport((), (), ())
    frame = pull_frame(rt)
    world = frame.world
    plan: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    skipped: list[tuple[str, str]] = []
    for subject, attribute in wanted_pairs:
        answering = [s for s in frame.config.sources if _answers(s, world, subject, attribute)]
        if not answering:
            skipped.append((subject, attribute))
        for spec in answering:
            plan[spec.name][attribute].add(subject)
    specs = [s for s in frame.config.sources if s.name in plan]
    wanted = {
        name: {a: frozenset(subs) for a, subs in attrs.items()} for name, attrs in plan.items()
    }
    jobs = _jobs(specs, world, wanted, client or transport(), now)
    results = _run(jobs, wanted=wanted, deadline=deadline)
    outcomes: list[PullOutcome] = []
    failures: list[SourceFailure] = []
    for job, result in zip(jobs, results, strict=True):
        if result.error is not None:
            failures.append(SourceFailure(job.spec.name, result.error, result.failed))
        try:
            outcomes.append(_store(rt, job.spec, result, now, scheduled=False))
        except CaveatError as exc:  # the store refused the batch: the recall still answers
            failures.append(
                SourceFailure(
                    job.spec.name, f"not stored: {exc.message}", tuple(wanted[job.spec.name])
                )
            )
    return RefreshReport(tuple(outcomes), tuple(failures), tuple(skipped))
