"""The review queue's sections: what each lists and how it can be sorted. Pure
presentation over ``caveat.app.ReviewQueue`` (its ``about`` filters by subject)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from caveat import app as use

__all__ = ["SECTIONS", "Section"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Section:
    """One section of the queue."""

    name: str
    title: str
    blurb: str
    rows: Callable[[use.ReviewQueue], Sequence[Any]]
    sorts: dict[str, Callable[[Any], Any]]
    #: what the section's tile counts (its rows, unless said otherwise)
    counts: Callable[[use.ReviewQueue], int] | None = None

    def count(self, queue: use.ReviewQueue) -> int:
        """The section's number: its rows, or (refusals) the refused writes."""
        return len(self.rows(queue)) if self.counts is None else self.counts(queue)


SECTIONS: dict[str, Section] = {
    s.name: s
    for s in (
        Section(
            "awaiting",
            "Cases awaiting an outcome",
            "Open cases whose incident its sender reported resolved without saying how "
            "it concluded. Closing one as confirmed or rejected turns its citations into "
            "support or counter signals and moves its shadow items.",
            lambda q: q.awaiting,
            {
                "oldest": lambda c: (c.since, c.case_id),
                "case": lambda c: c.case_id,
                "subject": lambda c: (c.subjects, c.case_id),
                "cited": lambda c: (-len(c.cited), c.since, c.case_id),
            },
        ),
        Section(
            "false",
            "Active, conditions false now",
            "Tenant-wide items whose conditions do not hold on what is observed now: "
            "recall does not return them until they do. Each keeps its state; refute or "
            "revoke it if it will not hold again.",
            lambda q: q.false_now,
            {
                "subject": lambda f: (f.subject, f.attribute, f.item_id),
                "item": lambda f: f.item_id,
                "observed": lambda f: (
                    min(
                        (c.value.observed.observed_at for c in f.conditions if c.value.observed),
                        default=_EPOCH,
                    ),
                    f.item_id,
                ),
            },
        ),
        Section(
            "shadow",
            "Shadow items",
            "Recalled tenant-wide into the shadow log, never into a context. The next "
            "close of a matched case graduates or drops each by the tenant's thresholds.",
            lambda q: q.shadow,
            {
                "item": lambda r: r.stats.item_id,
                "subject": lambda r: (r.stats.subject, r.stats.item_id),
                "matched": lambda r: (r.stats.matched, r.stats.item_id),
                "agreement": lambda r: (
                    -1.0 if r.stats.agreement is None else r.stats.agreement,
                    r.stats.item_id,
                ),
                "next close": lambda r: (r.next_close, r.stats.item_id),
            },
        ),
        Section(
            "reopened",
            "Re-opened and checked on next use",
            "Items an event, a failed check, a counter signal or a revoked or refuted "
            "ancestor re-opened, and items to be checked against fresh observations on "
            "next use.",
            lambda q: q.reopened,
            {
                "newest": lambda r: (-(r.at or _EPOCH).timestamp(), r.item_id),
                "subject": lambda r: (r.subject, r.item_id),
                "state": lambda r: (r.state, r.item_id),
                "item": lambda r: r.item_id,
            },
        ),
        Section(
            "contested",
            "Contested keys",
            "Cases disagree on the value: never majority-voted. Every value is listed "
            "with the items and cases that hold it.",
            lambda q: q.contested,
            {
                "subject": lambda k: (k.subject, k.attribute),
                "values": lambda k: (-len(k.values), k.subject, k.attribute),
                "cases": lambda k: (-len(k.cases), k.subject, k.attribute),
            },
        ),
        Section(
            "candidates",
            "Promotion candidates",
            "Items of several cases that agree on the same key: ready to promote to shadow.",
            lambda q: q.candidates,
            {
                "subject": lambda k: (k.subject, k.attribute),
                "cases": lambda k: (-len(k.cases), k.subject, k.attribute),
            },
        ),
        Section(
            "refusals",
            "Recent refusals",
            "Writes and proposals the gate refused in the last seven days, by reason code.",
            lambda q: q.refusals,
            {
                "count": lambda g: (-g.count, g.code),
                "code": lambda g: g.code,
                "newest": lambda g: (-g.last_at.timestamp(), g.code),
            },
            counts=lambda q: q.refusal_count,  # what `caveat review` counts
        ),
    )
}
