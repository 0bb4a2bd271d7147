"""A recall with ``refresh`` (model §2.1): pull what its candidates need, then read.

Every door calls ``recall`` here (HTTP ``GET``/``POST /v1/recall``, the MCP ``recall``
and ``explain`` tools, ``caveat recall``), so the flow is written once:

1. ``caveat.app.recall_needs``: the ``(canonical subject, attribute)`` pairs the
   candidates' conditions lack (one read);
2. ``caveat.connectors.refresh``: those pulled from the sources that answer them,
   concurrently, within the deadline (the request's ``refresh_deadline_ms``, else the
   setting ``CAVEAT_REFRESH_DEADLINE_MS``); each source's samples are stored by
   ``caveat.app.store_pull`` as the source's principal, a failure is reported, never
   raised;
3. ``caveat.app.recall_items``: the recall as it is without refresh, a pure read, at
   the instant after the pull (a sample is dated by its source, so a read dated before
   the pull would not see it), on the primary when a replica has not replayed the
   pull yet (a consistency token past it).

The edge calls the application, never the reverse: this module lives in the
connectors and the doors call it; ``caveat.app`` knows nothing of sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import claims
from caveat import app as use
from caveat.app._requests import RecallIn
from caveat.connectors import RefreshReport, SourceFailure, refresh
from recall import RecallResult

__all__ = ["RecallAnswer", "recall"]


@dataclass(frozen=True)
class RecallAnswer:
    """A recall's result, and with ``refresh`` what the refresh did (None without)."""

    result: RecallResult
    report: RefreshReport | None = None

    @property
    def source_errors(self) -> tuple[SourceFailure, ...]:
        """The sources that failed or timed out (none without a refresh)."""
        return () if self.report is None else self.report.failures


def deadline_of(rt: use.Runtime, body: RecallIn) -> timedelta:
    """The refresh's deadline: the request's, else the settings'."""
    ms = body.refresh_deadline_ms or rt.settings.refresh_deadline_ms
    return timedelta(milliseconds=ms)


def recall(
    rt: use.Runtime,
    actor: claims.Actor,
    body: RecallIn,
    *,
    token: str | None = None,
    now: datetime | None = None,
) -> RecallAnswer:
    """The recall ``body`` asks for; with ``refresh``, pulled for first (the module's
    flow). ``now`` fixes every step's instant (tests, replay); None: the wall clock,
    read again after the pull."""
    request = body.to_request()
    if not body.refresh:
        return RecallAnswer(use.recall_items(rt, actor, request, now=now, token=token))
    needs = use.recall_needs(rt, actor, request, now=now, token=token)
    report = refresh(rt, needs, deadline=deadline_of(rt, body), now=now)
    if rt.replica is not None and any(o.stored for o in report.outcomes):
        token = rt.write_position()  # past the pull's commits: a replica must have them
    return RecallAnswer(use.recall_items(rt, actor, request, now=now, token=token), report)
