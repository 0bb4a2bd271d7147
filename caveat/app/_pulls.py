"""When each fact source is pulled, and what its pulls did (model §2.1; docs/sources.md,
"Scheduled pulls" and "Status").

A source with ``every`` is due ``every`` after its last pull, jittered by up to ±10%
and backed off after consecutive failures (``pull_delay``); the jitter is a hash of the
tenant, the source and its pull count, not a random draw, so every worker and replica
computes the same instant and ``sources status`` shows the one the server will use.

``pull_sources`` is the use case a person calls (``caveat sources pull``, ``POST
/v1/sources/pull``): it checks who asks and which names, then hands the pull to the
``puller`` the door gives it (``caveat.connectors.pull_sources``): the connectors call
the application layer, never the reverse, so the application takes the fetch as a
function instead of importing the edge.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

import claims
import factgen
from caveat.app._runtime import Runtime, utcnow
from caveat.app._sources import PullOutcome
from predicates.errors import NotFound

__all__ = [
    "BACKOFF_CAP",
    "JITTER",
    "Puller",
    "SourceReport",
    "due_sources",
    "pull_delay",
    "pull_sources",
    "sources_status",
]

#: How far a scheduled pull is moved from its nominal instant, as a fraction of the delay.
JITTER = 0.10
#: The back-off's ceiling: a failing source is retried at most this long apart (never
#: less than ``every``, never more than ten times it).
BACKOFF_CAP = timedelta(minutes=5)

#: What pulls (``caveat.connectors.pull_sources``): the tenant's runtime, the names (None:
#: every source), the instant; one outcome per source pulled.
Puller = Callable[..., list[PullOutcome]]


def _jitter(tenant: str, source: str, pulls: int) -> float:
    """A fraction in [-JITTER, +JITTER], the same in every process for the same pull."""
    digest = hashlib.blake2b(f"{tenant}\0{source}\0{pulls}".encode(), digest_size=8).digest()
    unit = int.from_bytes(digest, "big") / float(2**64 - 1)  # [0, 1]
    return (2 * unit - 1) * JITTER


def pull_delay(every: timedelta, consecutive_failures: int) -> timedelta:
    """The delay after a pull before the next, jitter aside: ``every``, doubled for each
    consecutive failure, at most ``max(every, min(10 x every, BACKOFF_CAP))``."""
    cap = max(every, min(every * 10, BACKOFF_CAP))
    if consecutive_failures <= 0:
        return every
    backed_off: timedelta = every * 2 ** min(consecutive_failures, 32)
    return min(backed_off, cap)


@dataclass(frozen=True)
class SourceReport(factgen.SourceStatus):
    """A source's status with its schedule: what ``caveat sources status`` and ``GET
    /v1/sources/status`` show. ``declared`` is False for a source that was pulled before
    and is no longer in the loaded ``sources.yaml``."""

    kind: str | None
    every: timedelta | None
    declared: bool
    next_pull_at: datetime | None
    due: bool

    def to_json(self) -> dict[str, Any]:
        def iso(at: datetime | None) -> str | None:
            return None if at is None else at.isoformat()

        return {
            "source": self.source,
            "kind": self.kind,
            "declared": self.declared,
            "every_seconds": None if self.every is None else self.every.total_seconds(),
            "pulls": self.pulls,
            "last_pull_at": iso(self.last_pull_at),
            "last_ok_at": iso(self.last_ok_at),
            "samples_stored": self.samples_stored,
            "refused": dict(self.refused),
            "errors": self.errors,
            "last_error": self.last_error,
            "last_error_at": iso(self.last_error_at),
            "consecutive_failures": self.consecutive_failures,
            "last_latency_ms": self.last_latency_ms,
            "scheduled": self.every is not None,
            "next_pull_at": iso(self.next_pull_at),
            "due": self.due,
        }


def _never(source: str) -> factgen.SourceStatus:
    return factgen.SourceStatus(source, 0, None, None, 0, {}, 0, None, None, 0, None)


def _report(
    tenant: str, spec: factgen.SourceSpec | None, st: factgen.SourceStatus, now: datetime
) -> SourceReport:
    every = None if spec is None else spec.every
    next_at: datetime | None = None
    if every is not None:
        if st.last_pull_at is None:
            next_at = now  # never pulled: due at once
        else:
            delay = pull_delay(every, st.consecutive_failures)
            next_at = st.last_pull_at + delay * (1 + _jitter(tenant, st.source, st.pulls))
    return SourceReport(
        **{f.name: getattr(st, f.name) for f in fields(factgen.SourceStatus)},
        kind=None if spec is None else spec.kind,
        every=every,
        declared=spec is not None,
        next_pull_at=next_at,
        due=next_at is not None and next_at <= now,
    )


def _reports(rt: Runtime, now: datetime) -> list[SourceReport]:
    with rt.transaction() as s:
        loaded = factgen.loaded_sources(session=s, tenant=rt.tenant)
        rows = {st.source: st for st in factgen.source_status(session=s, tenant=rt.tenant)}
    specs = [] if loaded is None else loaded.config.sources
    out = [_report(rt.tenant, spec, rows.pop(spec.name, _never(spec.name)), now) for spec in specs]
    out += [_report(rt.tenant, None, st, now) for st in sorted(rows.values(), key=_name)]
    return out


def _name(st: factgen.SourceStatus) -> str:
    return st.source


def sources_status(
    rt: Runtime, actor: claims.Actor, *, now: datetime | None = None
) -> list[SourceReport]:
    """Every declared source (in the file's order, a source never pulled with zero
    counts), then any source pulled before and no longer declared: its pulls, samples
    stored, refusals by reason, errors with the last one, latency, consecutive failures,
    and when it is next due (admins and SMEs)."""
    actor.require("sources_read")
    return _reports(rt, now or utcnow())


def due_sources(rt: Runtime, *, now: datetime | None = None) -> list[str]:
    """The sources with ``every`` that are due at ``now`` (no actor: the schedule is the
    server's, which reads it to decide what to pull)."""
    return [r.source for r in _reports(rt, now or utcnow()) if r.due]


def pull_sources(
    rt: Runtime,
    actor: claims.Actor,
    names: Sequence[str] | None = None,
    *,
    puller: Puller,
    now: datetime | None = None,
) -> list[PullOutcome]:
    """Pull the named sources now (None: every declared one), whatever their schedule
    (admin): ``not_found`` for a name the loaded ``sources.yaml`` does not declare; each
    pull stores what it fetched as its source's principal and counts it in the status."""
    actor.require("sources")
    if names is not None:
        with rt.transaction() as s:
            loaded = factgen.loaded_sources(session=s, tenant=rt.tenant)
        declared = set() if loaded is None else {spec.name for spec in loaded.config.sources}
        for name in names:
            if name not in declared:
                raise NotFound(f"no source {name!r} in the tenant's sources.yaml", source=name)
    return list(puller(rt, None if names is None else list(names), now=now))
