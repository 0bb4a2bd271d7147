"""The SME's use cases (docs/sme.md): the review queue, an item's dossier, what an action
would do, and taking it with a rationale. The SME pages and the HTTP API call these.

Every list here holds only what the actor may read (the domain filters before
anything is counted), so a page's counts and pages reveal nothing of hidden items.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypeVar

import claims
import factgen
import lifecycle
import recall
from caveat.app import _usecases as uc
from caveat.app._runtime import Runtime
from caveat.app._unit import Unit, clock, usecase
from predicates.errors import InputError

__all__ = [
    "ActionDone",
    "Changes",
    "Listing",
    "ReviewQueue",
    "ShadowRow",
    "action_preview",
    "audit_about",
    "changes",
    "item_dossier",
    "listing",
    "review_queue",
    "subject_matches",
    "take_action",
    "transition_view",
    "transitions",
]

T = TypeVar("T")

#: How far back the queue looks for refused writes.
REFUSALS_WINDOW = timedelta(days=7)


@dataclass(frozen=True)
class ShadowRow:
    """A shadow item with its log's numbers and what the next close would do with it."""

    stats: lifecycle.ShadowStats
    next_close: str  # graduate, drop or wait

    @property
    def subject(self) -> str:
        """The item's subject."""
        return self.stats.subject


def subject_matches(wanted: str | None, *subjects: str) -> bool:
    """The subject filter of every page and of ``caveat review --subject``: whether any
    of ``subjects`` contains ``wanted`` (case-insensitive); None or blank matches all."""
    text = (wanted or "").strip().lower()
    return not text or any(text in s.lower() for s in subjects)


@dataclass(frozen=True)
class ReviewQueue:
    """What waits for an SME, each list only of what the actor may read."""

    shadow: tuple[ShadowRow, ...]
    policy: factgen.ShadowPolicy  # the thresholds the next close applies
    reopened: tuple[lifecycle.Reopened, ...]
    contested: tuple[lifecycle.PromotionKey, ...]
    candidates: tuple[lifecycle.PromotionKey, ...]
    refusals: tuple[lifecycle.RefusalGroup, ...]
    refusals_since: datetime
    awaiting: tuple[lifecycle.Awaiting, ...]  # open cases waiting for their outcome
    false_now: tuple[lifecycle.FalseNow, ...] = ()  # active items whose conditions are false

    def about(self, subject: str | None) -> ReviewQueue:
        """The rows about subjects whose name contains ``subject`` (case-insensitive; a
        refusal group when any refused write named one); None or blank: every row."""
        if not (subject or "").strip():
            return self

        def keep(*subjects: str) -> bool:
            return subject_matches(subject, *subjects)

        return replace(
            self,
            shadow=tuple(r for r in self.shadow if keep(r.subject)),
            reopened=tuple(r for r in self.reopened if keep(r.subject)),
            contested=tuple(k for k in self.contested if keep(k.subject)),
            candidates=tuple(k for k in self.candidates if keep(k.subject)),
            refusals=tuple(g for g in self.refusals if keep(*g.subjects)),
            awaiting=tuple(c for c in self.awaiting if keep(*c.subjects)),
            false_now=tuple(f for f in self.false_now if keep(f.subject)),
        )

    @property
    def refusal_count(self) -> int:
        """How many writes were refused (not how many reason codes): the queue's tile
        and ``caveat review`` count this."""
        return sum(g.count for g in self.refusals)


@usecase()
def review_queue(u: Unit, *, now: datetime | None = None) -> ReviewQueue:
    """The review queue in one transaction: shadow items (matched cases, agreement, what
    the next close would do), re-opened items with the event or check behind each,
    contested keys with every value and who holds it, promotion candidates, the last
    week's refusals grouped by reason code, and the open cases whose incident was
    reported over without an outcome (each to close as confirmed or rejected), and the
    active items whose conditions are false now."""
    at = clock(now)
    since = at - REFUSALS_WINDOW
    report = lifecycle.shadow_report(**u.scope())
    decisions = {i: "graduate" for i in report.would_graduate} | {
        i: "drop" for i in report.would_drop
    }
    return ReviewQueue(
        tuple(ShadowRow(st, decisions.get(st.item_id, "wait")) for st in report.items),
        report.policy,
        tuple(lifecycle.reopened(**u.scope())),
        tuple(lifecycle.contested(**u.scope())),
        tuple(lifecycle.candidates(**u.scope())),
        tuple(lifecycle.refusal_groups(**u.scope(), since=since)),
        since,
        tuple(lifecycle.awaiting_outcome(**u.scope())),
        tuple(lifecycle.false_now(**u.scope(), world=u.world(), now=at)),
    )


@usecase(require="read")
def item_dossier(u: Unit, item_id: int, *, now: datetime | None = None) -> lifecycle.Dossier:
    """Everything an SME reads about one item: its text and provenance, each condition
    against what is observed now, evidence, confidence, citations, lineage and history."""
    return lifecycle.dossier(**u.at(now), item_id=item_id, world=u.world())


@usecase()
def action_preview(u: Unit, item_id: int, action: str) -> lifecycle.ActionPreview:
    """What an SME action would do, before it is done (a read: nothing changes)."""
    return lifecycle.preview_action(**u.scope(), item_id=item_id, action=action)


@dataclass(frozen=True)
class ActionDone:
    """An SME action taken: the item as it is now, and what a revocation re-opened."""

    action: str
    item_id: int
    state: str | None  # None after a redaction or an erasure: the item is hidden
    reopened: tuple[int, ...] = ()


def take_action(
    rt: Runtime,
    actor: claims.Actor,
    item_id: int,
    action: str,
    *,
    rationale: str,
    now: datetime | None = None,
) -> ActionDone:
    """Take one of the SME actions (``lifecycle.SME_ACTIONS``) with a rationale, which
    every action needs here and which lands in the audit log; the action's own use case
    checks the role and the transition."""
    why = rationale.strip()
    if not why:
        raise InputError("a rationale is required", attribute="rationale")
    if action == "verify":
        rec = uc.verify(rt, actor, item_id, rationale=why, now=now)
    elif action == "promote":
        rec = uc.promote(rt, actor, item_id, to="shadow", rationale=why, now=now)
    elif action == "graduate":
        rec = uc.graduate(rt, actor, item_id, rationale=why, now=now)
    elif action == "drop":
        rec = uc.drop(rt, actor, item_id, rationale=why, now=now)
    elif action == "refute":
        rec = uc.refute(rt, actor, item_id, reason=why, now=now)
    elif action == "revoke":
        done = uc.revoke(rt, actor, item_id, reason=why, now=now)
        return ActionDone(action, item_id, done.item.state, tuple(done.reopened))
    elif action == "redact":
        uc.redact(rt, actor, item_id, reason=why, now=now)
        return ActionDone(action, item_id, None)
    elif action == "forget":  # real erasure (admin): the rationale is its reason
        from caveat.app._forget import forget  # its answers import this module's

        forget(rt, actor, items=[item_id], reason=why, now=now)
        return ActionDone(action, item_id, None)
    else:
        raise InputError(
            f"unknown action {action!r}; expected one of {', '.join(lifecycle.SME_ACTIONS)}",
            attribute="action",
        )
    return ActionDone(action, item_id, rec.state)


#: How many transitions a window lists at most (the newest).
TRANSITIONS_LIMIT = 1000

#: What "What changed" compares when it is given no window.
CHANGES_WINDOW = timedelta(days=7)


def changes_window(
    from_: datetime | None, to: datetime | None, now: datetime
) -> tuple[datetime, datetime]:
    """The window "What changed" and the transitions compare: ``to`` (default ``now``)
    and ``from_`` (default ``CHANGES_WINDOW`` before ``to``; the first instant there is
    when that is before it)."""
    end = to or now
    if from_ is not None:
        return from_, end
    try:
        return end - CHANGES_WINDOW, end
    except OverflowError:  # a `to` within a week of year 1
        return datetime.min.replace(tzinfo=UTC), end


@usecase(require="read")
def transitions(
    u: Unit,
    *,
    from_: datetime,
    to: datetime,
    subject: str | None = None,
    limit: int = TRANSITIONS_LIMIT,
) -> list[lifecycle.TransitionRow]:
    """The state transitions made between two instants (both included), oldest first, of
    the items the actor may read whose subject ``subject`` matches (``subject_matches``):
    every change inside a window, where a diff compares its two ends."""
    rows = lifecycle.transitions_between(**u.scope(), since=from_, until=to, limit=limit)
    return [r for r in rows if subject_matches(subject, r.subject)]


def transition_view(r: lifecycle.TransitionRow) -> dict[str, Any]:
    """A transition as the JSON doors give it (``GET /v1/transitions``, ``caveat
    transitions --json``)."""
    return {
        "seq": r.seq,
        "at": r.at.isoformat(),
        "item": r.item_id,
        "subject": r.subject,
        "attribute": r.attribute,
        "from": r.from_state,
        "to": r.to_state,
        "actor": r.actor,
        "reason": r.reason,
        "cause": r.cause,
    }


@dataclass(frozen=True)
class Changes:
    """What changed for a reader in a window: the belief diff between its two ends and
    the transitions made inside it, both for the subjects the filter matches."""

    diff: recall.BeliefDiff
    became: tuple[recall.DiffEntry, ...]
    stopped: tuple[recall.DiffEntry, ...]
    transitions: tuple[lifecycle.TransitionRow, ...]
    default_window: bool  # no instant was given: the last CHANGES_WINDOW up to now
    truncated: bool  # more than TRANSITIONS_LIMIT transitions: the newest are listed


def changes(
    rt: Runtime,
    actor: claims.Actor,
    *,
    from_: datetime | None = None,
    to: datetime | None = None,
    subject: str | None = None,
    now: datetime | None = None,
) -> Changes:
    """ "What changed" (docs/sme.md): what the actor could recall at ``to`` and not at
    ``from_`` and the reverse (default: the last seven days up to now), and every
    transition made in between; the subject filter is the queue's (a case-insensitive
    part of the item's subject), on both."""
    at = clock(now)
    start, end = changes_window(from_, to, at)
    d = uc.diff(rt, actor, from_=start, to=end, now=at)
    kept = tuple(e for e in d.entries if subject_matches(subject, e.item.subject))
    moves = transitions(rt, actor, from_=start, to=end, limit=TRANSITIONS_LIMIT)
    return Changes(
        d,
        tuple(e for e in kept if e.change == "became"),
        tuple(e for e in kept if e.change == "stopped"),
        tuple(m for m in moves if subject_matches(subject, m.subject)),
        from_ is None and to is None,
        len(moves) >= TRANSITIONS_LIMIT,
    )


#: How many of the newest audit rows a filtered audit view reads.
AUDIT_VIEW_ROWS = 5000


def _named(detail: dict[str, Any], key: str) -> Any:
    cause = detail.get("cause")
    return detail.get(key) if key in detail else (cause or {}).get(key)


def audit_about(
    rt: Runtime, actor: claims.Actor, *, case: str | None = None, event: int | None = None
) -> list[claims.AuditEntryRecord]:
    """The audit rows naming a case (its opening, citations, report, close, and what its
    close caused) or an event (its row and the transitions it caused), oldest first,
    among the newest ``AUDIT_VIEW_ROWS`` rows ``actor`` may see (the pages link a case's
    and an event's id here: neither has a page of its own)."""
    if case is None and event is None:
        raise InputError("name a case or an event", attribute="case")
    rows = uc.audit_entries(rt, actor, limit=AUDIT_VIEW_ROWS)
    return [
        r
        for r in rows
        if (case is not None and _named(r.detail, "case") == case)
        or (event is not None and _named(r.detail, "event") == event)
    ]


@dataclass(frozen=True)
class Listing(Generic[T]):
    """One page of a list, sorted, with what a page needs to link the others."""

    rows: tuple[T, ...]
    page: int
    pages: int
    total: int
    sort: str
    descending: bool


def listing(
    rows: Sequence[T],
    *,
    sorts: dict[str, Callable[[T], Any]],
    sort: str | None = None,
    descending: bool = False,
    page: int = 1,
    per_page: int = 20,
) -> Listing[T]:
    """Sort ``rows`` by one of ``sorts`` (the first is the default) and cut page ``page``
    (from 1) of ``per_page``. An unknown sort or page is ``invalid_input``."""
    key_name = sort or next(iter(sorts))
    if key_name not in sorts:
        raise InputError(f"sort: {key_name!r} is not one of {', '.join(sorts)}", attribute="sort")
    if page < 1 or per_page < 1:
        raise InputError("page: pages count from 1", attribute="page")
    ordered = sorted(rows, key=sorts[key_name], reverse=descending)
    pages = max(1, math.ceil(len(ordered) / per_page))
    start = (page - 1) * per_page
    return Listing(
        tuple(ordered[start : start + per_page]), page, pages, len(ordered), key_name, descending
    )
