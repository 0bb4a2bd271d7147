"""``forget``: real erasure (model §7) for every door, with its preview.

The erasure is one transaction (``lifecycle.forget``); after it commits, the tables it
changed are vacuumed and the indexes that keep removed keys rebuilt
(``lifecycle.vacuum_erased``), outside any transaction, as the application role when
it may (``MAINTAIN``, migration 0023), else as the owner of the store's URL, else not
at all (the answer then names the tables left: docs/operations.md, "Erasure").
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa

import claims
import lifecycle
from caveat import db
from caveat.answers._forget import ErasurePlanOut, ForgetOut
from caveat.app._runtime import Runtime
from caveat.app._unit import Unit, clock, usecase
from predicates.errors import InputError

log = logging.getLogger(__name__)

__all__ = [
    "ErasurePlanOut",
    "ForgetDone",
    "ForgetOut",
    "forget",
    "forget_done_view",
    "forget_plan_view",
    "forget_preview",
    "forget_target",
]


@dataclass(frozen=True)
class ForgetDone:
    """A ``forget`` done: its record, what it deleted per table, and what was vacuumed."""

    erasure: lifecycle.Erasure
    vacuumed: tuple[str, ...] = ()
    #: Tables this process may not vacuum: their dead row versions are still in the
    #: files until the owner vacuums them (``VACUUM`` them as the tables' owner).
    not_vacuumed: tuple[str, ...] = ()
    deleted: dict[str, int] = field(default_factory=dict)
    #: Why each of ``not_vacuumed`` was left (no privilege, its lock, the server's error).
    why_not_vacuumed: dict[str, str] = field(default_factory=dict)


def forget_target(
    *, items: Sequence[int] = (), subject: str | None = None, anchor: str | None = None
) -> tuple[str, str, tuple[int, ...]]:
    """``(axis, target, item_ids)`` from a door's one choice of items, a subject or an
    anchor ``AXIS:ID``; an ``InputError`` naming the field otherwise."""
    given = [n for n, v in (("items", items), ("subject", subject), ("anchor", anchor)) if v]
    if len(given) != 1:
        raise InputError(
            "forget takes exactly one of items, subject or anchor "
            + (f"(given: {', '.join(given)})" if given else "(given: none)"),
            attribute="target",
        )
    if items:
        return "item", "", tuple(int(i) for i in items)
    if subject:
        return "subject", subject, ()
    assert anchor is not None
    try:
        axis, ident = claims.split_anchor(anchor)
    except ValueError as exc:  # pydantic's error of the anchor's form
        raise InputError(f"anchor: {exc}", attribute="anchor") from exc
    if axis in ("item", "subject"):
        raise InputError(
            f"anchor: {axis!r} is not an anchor axis (use items or subject)", attribute="anchor"
        )
    return axis, ident, ()


@usecase(require="forget", use="forget_preview")
def forget_preview(
    u: Unit,
    *,
    items: Sequence[int] = (),
    subject: str | None = None,
    anchor: str | None = None,
) -> lifecycle.ErasurePlan:
    """What ``forget`` would erase (admin): the item rows with their history, the audit
    rows whose detail goes, per subject and anchor; nothing is changed."""
    axis, target, ids = forget_target(items=items, subject=subject, anchor=anchor)
    return lifecycle.plan_forget(**u.scope(), axis=axis, target=target, item_ids=ids)


def forget(
    rt: Runtime,
    actor: claims.Actor,
    *,
    reason: str,
    items: Sequence[int] = (),
    subject: str | None = None,
    anchor: str | None = None,
    now: datetime | None = None,
) -> ForgetDone:
    """Erase items, a subject's or an anchor's (admin, with a reason): content, derived
    rows and the detail of the audit rows about them, in one transaction; then vacuum
    what the erasure left in the table files. The chain still verifies."""
    actor.require("forget")
    axis, target, ids = forget_target(items=items, subject=subject, anchor=anchor)
    with rt.transaction("forget") as session:
        erasure = lifecycle.forget(
            session=session,
            tenant=rt.tenant,
            actor=actor,
            now=clock(now),
            reason=reason,
            axis=axis,
            target=target,
            item_ids=ids,
        )
    vacuumed, left = _vacuum(rt)
    return ForgetDone(erasure, vacuumed, tuple(left), erasure.deleted, left)


def _vacuum(rt: Runtime) -> tuple[tuple[str, ...], dict[str, str]]:
    """Vacuum as the application role; what it may not, as the owner of the store's URL
    when there is one that differs; the tables vacuumed, and those left with why. A
    failure here leaves the committed erasure as it is: the answer names the table."""
    tables = (*lifecycle.ERASED_TABLES, lifecycle.STATISTICS)
    left = _vacuum_on(rt.engine, tables)
    if left and rt.server_url and rt.server_url != str(rt.engine.url):
        owner = db.make_engine(rt.server_url, poolclass=sa.pool.NullPool)
        try:
            again = _vacuum_on(owner, tuple(left))
        finally:
            owner.dispose()
        left = {t: again[t] for t in left if t in again}
    return tuple(t for t in tables if t not in left), {t: left[t] for t in tables if t in left}


def _vacuum_on(engine: sa.Engine, tables: Sequence[str]) -> dict[str, str]:
    """``lifecycle.vacuum_erased`` on ``engine`` (autocommit) for those of ``tables``
    left by an earlier pass; a connection that fails names every table it left."""
    try:
        with engine.connect() as conn:
            auto = conn.execution_options(isolation_level="AUTOCOMMIT")
            left = lifecycle.vacuum_erased(connection=auto, only=tables)
    except sa.exc.DBAPIError as exc:
        why = str(exc.orig or exc).strip().splitlines()[0]
        log.warning("erasure: no vacuum on %s: %s", engine.url.render_as_string(), why)
        return dict.fromkeys(tables, why)
    return left


def forget_plan_view(plan: lifecycle.ErasurePlan) -> dict[str, Any]:
    """``ErasurePlanOut``'s JSON form."""
    return {
        "axis": plan.axis,
        "target": plan.target,
        "items": list(plan.items),
        "audit_rows": len(plan.audit_rows),
        "by_subject": dict(plan.by_subject),
        "by_anchor": dict(plan.by_anchor),
        "descendants": list(plan.descendants),
    }


def forget_done_view(done: ForgetDone) -> dict[str, Any]:
    """``ForgetOut``'s JSON form."""
    e = done.erasure
    return {
        "erasure": e.id,
        "axis": e.axis,
        "target": e.target,
        "items": list(e.items),
        "audit_rows": len(e.audit_rows),
        "deleted": {k: v for k, v in done.deleted.items() if v},
        "vacuumed": list(done.vacuumed),
        "not_vacuumed": list(done.not_vacuumed),
        "why_not_vacuumed": dict(done.why_not_vacuumed),
    }
