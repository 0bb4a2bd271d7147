"""What the erasure doors answer (``/v1/forget``)."""

from __future__ import annotations

from caveat.answers._answers import Answer


class ErasurePlanOut(Answer):
    """What a ``forget`` would erase: the item rows (history included), the audit rows
    whose detail goes, the rows per subject and per anchor (``axis:id``), and the items
    built on them (not erased)."""

    axis: str
    target: str
    items: list[int]
    audit_rows: int
    by_subject: dict[str, int]
    by_anchor: dict[str, int]
    descendants: list[int]


class ForgetOut(Answer):
    """A ``forget`` done: its erasure record, the items erased, how many audit details
    went, the rows deleted per table, and the tables vacuumed (and any left)."""

    erasure: int
    axis: str
    target: str
    items: list[int]
    audit_rows: int
    deleted: dict[str, int]
    vacuumed: list[str]
    not_vacuumed: list[str]
    #: Why each table of ``not_vacuumed`` was left.
    why_not_vacuumed: dict[str, str]
