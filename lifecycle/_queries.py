"""All SQL of lifecycle. Functions take the session as a keyword; callers own the transaction."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.orm import Session

from claims._queries import ITEM_COLUMNS, ITEMS, TRANSITIONS, private_visible, readable

__all__: list[str] = []


def insert_case(
    *,
    session: Session,
    tenant: str,
    case_id: str,
    subjects: Sequence[str],
    at: datetime,
    actor: str,
) -> bool:
    row = session.execute(
        sa.text(
            "INSERT INTO cases (tenant_id, id, subjects, status, opened_at, opened_by) "
            "VALUES (:t, :id, :s, 'open', :at, :a) ON CONFLICT DO NOTHING RETURNING id"
        ),
        {"t": tenant, "id": case_id, "s": list(subjects), "at": at, "a": actor},
    ).first()
    return row is not None


def case(*, session: Session, tenant: str, case_id: str, lock: bool = False) -> sa.Row[Any] | None:
    suffix = " FOR UPDATE" if lock else ""
    return session.execute(
        sa.text(
            "SELECT id, subjects, status, outcome, opened_at, opened_by, closed_at, closed_by "
            f"FROM cases WHERE tenant_id = :t AND id = :id{suffix}"
        ),
        {"t": tenant, "id": case_id},
    ).first()


def close_case(
    *, session: Session, tenant: str, case_id: str, outcome: str, at: datetime, actor: str
) -> None:
    session.execute(
        sa.text(
            "UPDATE cases SET status = 'closed', outcome = :o, closed_at = :at, closed_by = :a "
            "WHERE tenant_id = :t AND id = :id"
        ),
        {"t": tenant, "id": case_id, "o": outcome, "at": at, "a": actor},
    )


def lock_items(*, session: Session, tenant: str, ids: Sequence[int]) -> Sequence[sa.Row[Any]]:
    return session.execute(
        sa.text(
            "SELECT item_id AS id, state FROM item_states WHERE tenant_id = :t "
            "AND item_id = ANY(:ids) ORDER BY item_id FOR UPDATE"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()


# --- lineage -----------------------------------------------------------------

# A CTE ``d(id)``: every item derived from ``:i``, transitively, in one range scan
# of ``item_ancestry``'s primary key (tenant, ancestor, descendant).
_DESCENDANTS = (
    "d(id) AS (SELECT descendant_id FROM item_ancestry WHERE tenant_id = :t AND ancestor_id = :i)"
)


def lineage_edges(
    *, session: Session, tenant: str, item_id: int, gate: dict[str, Any]
) -> Sequence[sa.Row[Any]]:
    """Rows ``(id, derived_from, state)`` of the item, its ancestors and its descendants;
    ``private_ok``: the reader (``gate``: ``Actor.gate_params``) may know of it at all
    (``claims._queries.private_visible``: not another principal's working memory)."""
    return session.execute(
        sa.text(
            "WITH RECURSIVE anc(id) AS ("
            "  SELECT CAST(:i AS bigint)"
            "  UNION SELECT unnest(i.derived_from) FROM items i JOIN anc ON i.id = anc.id "
            "  WHERE i.tenant_id = :t"
            f"), {_DESCENDANTS} "
            "SELECT i.id, i.derived_from, cur.state, i.subject, i.attribute, i.kind, i.text, "
            "i.acl, i.deny, i.classification, (r.item_id IS NOT NULL) AS redacted, "
            f"{private_visible('i')} AS private_ok FROM {ITEMS} "
            "LEFT JOIN redactions r ON r.tenant_id = i.tenant_id AND r.item_id = i.id "
            "WHERE i.tenant_id = :t "
            "AND (i.id IN (SELECT id FROM anc) OR i.id IN (SELECT id FROM d)) "
            "ORDER BY i.id"
        ),
        {**gate, "t": tenant, "i": item_id},
    ).all()


# --- verify-on-next-use checks ---------------------------------------------------


def drop_expiry_checks(*, session: Session, tenant: str, ids: Sequence[int]) -> None:
    """Forget pending checks of items that left ``verify_on_next_use``."""
    if ids:
        session.execute(
            sa.text("DELETE FROM expiry_checks WHERE tenant_id = :t AND item_id = ANY(:ids)"),
            {"t": tenant, "ids": list(ids)},
        )


def pending_checks(*, session: Session, tenant: str, ids: Sequence[int]) -> dict[int, datetime]:
    """``since`` of each item's pending check (else: when it entered ``verify_on_next_use``)."""
    rows = session.execute(
        sa.text(
            "SELECT i.id, coalesce(ec.since, ("
            f"  SELECT max(t.at) FROM {TRANSITIONS} t WHERE t.tenant_id = i.tenant_id "
            "  AND t.item_id = i.id AND t.to_state = 'verify_on_next_use')) AS since "
            "FROM items i LEFT JOIN expiry_checks ec "
            "  ON ec.tenant_id = i.tenant_id AND ec.item_id = i.id "
            "WHERE i.tenant_id = :t AND i.id = ANY(:ids)"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()
    return {int(r.id): r.since for r in rows if r.since is not None}


def upsert_expiry_checks(
    *,
    session: Session,
    tenant: str,
    ids: Sequence[int],
    since: Sequence[datetime],
    event_id: int | None,
    cause: dict[str, Any],
) -> None:
    """Record (or move later) the pending check of each item."""
    if not ids:
        return
    session.execute(
        sa.text(
            "INSERT INTO expiry_checks (tenant_id, item_id, since, event_id, cause) "
            "SELECT :t, u.id, u.since, :e, CAST(:c AS jsonb) "
            "FROM unnest(CAST(:ids AS bigint[]), CAST(:since AS timestamptz[])) AS u(id, since) "
            "ON CONFLICT (tenant_id, item_id) DO UPDATE SET "
            "since = greatest(expiry_checks.since, EXCLUDED.since), "
            "event_id = coalesce(EXCLUDED.event_id, expiry_checks.event_id), "
            "cause = EXCLUDED.cause"
        ),
        {
            "t": tenant,
            "ids": list(ids),
            "since": list(since),
            "e": event_id,
            "c": json.dumps(cause),
        },
    )


def ttl_due(
    *,
    session: Session,
    tenant: str,
    content_type: str,
    ttl: timedelta,
    now: datetime,
    ids: Sequence[int] | None,
) -> list[tuple[int, datetime]]:
    """Active items of ``content_type`` active for longer than ``ttl``: (id, when it ran out)."""
    rows = session.execute(
        sa.text(
            f"SELECT i.id, lt.at + CAST(:ttl AS interval) AS due FROM {ITEMS} "
            f"CROSS JOIN LATERAL (SELECT max(t.at) AS at FROM {TRANSITIONS} t "
            "  WHERE t.tenant_id = i.tenant_id AND t.item_id = i.id "
            "  AND t.to_state = 'active') lt "
            "WHERE i.tenant_id = :t AND cur.state = 'active' AND i.content_type = :ct "
            "AND i.superseded_at IS NULL AND lt.at + CAST(:ttl AS interval) <= :now "
            "AND (CAST(:all AS boolean) OR i.id = ANY(:ids)) ORDER BY i.id"
        ),
        {
            "t": tenant,
            "ct": content_type,
            "ttl": ttl,
            "now": now,
            "all": ids is None,
            "ids": list(ids or ()),
        },
    ).all()
    return [(int(r.id), r.due) for r in rows]


# --- events --------------------------------------------------------------------


def match_event(
    *,
    session: Session,
    tenant: str,
    content_types: Sequence[str],
    subjects: Sequence[str],
    names: Sequence[str],
    full: bool = True,
) -> Sequence[sa.Row[Any]]:
    """Current, unredacted items an event may re-open (model §4.3 step 1).

    ``names``: entity names (e.g. a principal's) that also match an item
    listing one of them among its entities. Without ``full``, only the
    columns the deterministic rule reads.
    """
    return session.execute(
        sa.text(
            f"SELECT {ITEM_COLUMNS if full else 'i.id, i.subject, cur.state, i.conditions'} "
            f"FROM {ITEMS} WHERE i.tenant_id = :t "
            "AND i.superseded_at IS NULL AND cur.state IN ('active', 'verify_on_next_use') "
            "AND i.content_type = ANY(:ct) "
            "AND (i.subject = ANY(:s) OR i.entities && CAST(:n AS text[])) "
            "AND NOT EXISTS (SELECT 1 FROM redactions r "
            "  WHERE r.tenant_id = i.tenant_id AND r.item_id = i.id) "
            "ORDER BY i.id"
        ),
        {"t": tenant, "ct": list(content_types), "s": list(subjects), "n": list(names)},
    ).all()


def match_conditions(
    *,
    session: Session,
    tenant: str,
    subjects: Sequence[str],
    patterns: Sequence[str],
    full: bool = True,
) -> Sequence[sa.Row[Any]]:
    """Current, unredacted items in ``active`` or ``verify_on_next_use`` with a condition
    about one of ``subjects`` (their own subject, or an ``@entity:`` reference, which is
    among the item's entities) whose attribute matches one of ``patterns`` (anchored
    regular expressions): the candidates of an event's condition rule (model §4.3 step
    1), which ``rule_flags`` then decides. Without ``full``, only the rule's columns."""
    conds = (
        "CASE WHEN jsonb_typeof(i.conditions -> '{0}') = 'array' "
        "THEN i.conditions -> '{0}' ELSE CAST('[]' AS jsonb) END"
    )
    return session.execute(
        sa.text(
            f"SELECT {ITEM_COLUMNS if full else 'i.id, i.subject, cur.state, i.conditions'} "
            f"FROM {ITEMS} WHERE i.tenant_id = :t "
            "AND i.superseded_at IS NULL AND cur.state IN ('active', 'verify_on_next_use') "
            "AND (i.subject = ANY(:s) OR i.entities && CAST(:s AS text[])) "
            "AND jsonb_typeof(i.conditions) = 'object' "
            "AND EXISTS (SELECT 1 FROM jsonb_array_elements("
            f"{conds.format('required')} || {conds.format('excluded')}) x "
            "  WHERE jsonb_typeof(x) = 'object' AND coalesce(x ->> 'e', i.subject) = ANY(:s) "
            "  AND x ->> 'a' ~ ANY(CAST(:p AS text[]))) "
            "AND NOT EXISTS (SELECT 1 FROM redactions r "
            "  WHERE r.tenant_id = i.tenant_id AND r.item_id = i.id) "
            "ORDER BY i.id"
        ),
        {"t": tenant, "s": list(subjects), "p": list(patterns)},
    ).all()


# --- redaction, usage, forgetting ----------------------------------------------


def redacted(*, session: Session, tenant: str, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` are redacted."""
    rows = session.execute(
        sa.text("SELECT item_id FROM redactions WHERE tenant_id = :t AND item_id = ANY(:ids)"),
        {"t": tenant, "ids": list(ids)},
    ).all()
    return {int(r[0]) for r in rows}


def insert_redactions(
    *,
    session: Session,
    tenant: str,
    ids: Sequence[int],
    at: datetime,
    actor: str,
    reason: str,
    erasure_id: int | None,
) -> list[int]:
    """Redact ``ids`` (those not redacted yet); returns the ids newly redacted."""
    rows = session.execute(
        sa.text(
            "INSERT INTO redactions (tenant_id, item_id, at, actor, reason, erasure_id) "
            "SELECT :t, u.id, :at, :a, :r, :e FROM unnest(CAST(:ids AS bigint[])) AS u(id) "
            "ON CONFLICT DO NOTHING RETURNING item_id"
        ),
        {"t": tenant, "ids": list(ids), "at": at, "a": actor, "r": reason, "e": erasure_id},
    ).all()
    return sorted(int(r[0]) for r in rows)


def insert_erasure(
    *, session: Session, tenant: str, axis: str, target: str, at: datetime, actor: str, reason: str
) -> int:
    return int(
        session.execute(
            sa.text(
                "INSERT INTO erasures (tenant_id, target_axis, target_id, at, actor, reason, "
                "items) VALUES (:t, :x, :i, :at, :a, :r, 0) RETURNING id"
            ),
            {"t": tenant, "x": axis, "i": target, "at": at, "a": actor, "r": reason},
        ).scalar_one()
    )


def set_erasure_count(*, session: Session, tenant: str, erasure_id: int, items: int) -> None:
    session.execute(
        sa.text("UPDATE erasures SET items = :n WHERE tenant_id = :t AND id = :i"),
        {"t": tenant, "n": items, "i": erasure_id},
    )


def items_of_target(*, session: Session, tenant: str, axis: str, target: str) -> list[int]:
    """Every item row (history included) of a subject, or anchored (scope or facet) at an anchor."""
    if axis == "subject":
        sql = "SELECT id FROM items WHERE tenant_id = :t AND subject = :x ORDER BY id"
        params: dict[str, Any] = {"t": tenant, "x": target}
    else:
        sql = (
            "SELECT id FROM items WHERE tenant_id = :t AND ((scope_axis = :a AND scope_id = :x) "
            "OR facets @> CAST(:f AS jsonb)) ORDER BY id"
        )
        params = {
            "t": tenant,
            "a": axis,
            "x": target,
            "f": json.dumps([{"axis": axis, "id": target}]),
        }
    return [int(r[0]) for r in session.execute(sa.text(sql), params).all()]


def record_use(*, session: Session, tenant: str, ids: Sequence[int], at: datetime) -> None:
    """Items used at ``at`` (returned by a recall or cited): last use and count."""
    if not ids:
        return
    session.execute(
        sa.text(
            "INSERT INTO item_usage (tenant_id, item_id, last_used_at, uses) "
            "SELECT :t, u.id, :at, 1 FROM unnest(CAST(:ids AS bigint[])) AS u(id) "
            "ON CONFLICT (tenant_id, item_id) DO UPDATE SET "
            "last_used_at = greatest(item_usage.last_used_at, EXCLUDED.last_used_at), "
            "uses = item_usage.uses + 1"
        ),
        {"t": tenant, "ids": sorted(set(ids)), "at": at},
    )


def unused_episodes(*, session: Session, tenant: str, before: datetime) -> list[int]:
    """Current episodes not used (or recorded) since ``before``, outside open cases."""
    rows = session.execute(
        sa.text(
            f"SELECT i.id FROM {ITEMS} "
            "LEFT JOIN item_usage u ON u.tenant_id = i.tenant_id AND u.item_id = i.id "
            "WHERE i.tenant_id = :t AND i.kind = 'episode' AND i.superseded_at IS NULL "
            "AND cur.state IN ('case', 'active', 'needs_reverification') "
            "AND coalesce(u.last_used_at, i.recorded_at) < :before "
            "AND NOT EXISTS (SELECT 1 FROM cases c WHERE c.tenant_id = i.tenant_id "
            "  AND i.scope_axis = 'case' AND c.id = i.scope_id AND c.status = 'open') "
            "ORDER BY i.id"
        ),
        {"t": tenant, "before": before},
    ).all()
    return [int(r[0]) for r in rows]


def expired_working_memory(*, session: Session, tenant: str, before: datetime) -> list[int]:
    """Current working-memory items (``session`` anchor, still ``case``) whose own last
    write is at or before ``before`` (now less the TTL: run out)."""
    rows = session.execute(
        sa.text(
            f"SELECT i.id FROM {ITEMS} "
            "WHERE i.tenant_id = :t AND i.scope_axis = 'session' AND i.superseded_at IS NULL "
            "AND cur.state = 'case' AND i.recorded_at <= :before ORDER BY i.id"
        ),
        {"t": tenant, "before": before},
    ).all()
    return [int(r[0]) for r in rows]


def rollup_episodes(*, session: Session, tenant: str) -> Sequence[sa.Row[Any]]:
    """Episodes that may be rolled up: current, unredacted, ``case`` (closed) or ``active``;
    never working memory (private to its session, it expires)."""
    return session.execute(
        sa.text(
            f"SELECT {ITEM_COLUMNS} FROM {ITEMS} WHERE i.tenant_id = :t AND i.kind = 'episode' "
            "AND i.scope_axis <> 'session' "
            "AND i.superseded_at IS NULL AND cur.state IN ('case', 'active') "
            "AND NOT EXISTS (SELECT 1 FROM redactions r "
            "  WHERE r.tenant_id = i.tenant_id AND r.item_id = i.id) "
            "AND NOT EXISTS (SELECT 1 FROM cases c WHERE c.tenant_id = i.tenant_id "
            "  AND i.scope_axis = 'case' AND c.id = i.scope_id AND c.status = 'open') "
            "ORDER BY i.id"
        ),
        {"t": tenant},
    ).all()


# --- cases, context and citations ------------------------------------------------


def enter_context(
    *, session: Session, tenant: str, case_id: str, ids: Sequence[int], at: datetime, via: str
) -> None:
    """Items that entered a case's context (the first entry is kept)."""
    if not ids:
        return
    session.execute(
        sa.text(
            "INSERT INTO case_context (tenant_id, case_id, item_id, entered_at, via) "
            "SELECT :t, :c, u.id, :at, :v FROM unnest(CAST(:ids AS bigint[])) AS u(id) "
            "ON CONFLICT DO NOTHING"
        ),
        {"t": tenant, "c": case_id, "ids": sorted(set(ids)), "at": at, "v": via},
    )


def in_context(*, session: Session, tenant: str, case_id: str, item_id: int) -> bool:
    return (
        session.execute(
            sa.text(
                "SELECT 1 FROM case_context WHERE tenant_id = :t AND case_id = :c AND item_id = :i"
            ),
            {"t": tenant, "c": case_id, "i": item_id},
        ).first()
        is not None
    )


def enforcement(*, session: Session, tenant: str, item_id: int) -> sa.Row[Any] | None:
    """The skill's ``(level, set_at, set_by, reason)``; none until an SME set one."""
    return session.execute(
        sa.text(
            "SELECT level, set_at, set_by, reason FROM skill_enforcement "
            "WHERE tenant_id = :t AND item_id = :i"
        ),
        {"t": tenant, "i": item_id},
    ).first()


def set_enforcement(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    level: str,
    reason: str,
    at: datetime,
    actor: str,
) -> None:
    session.execute(
        sa.text(
            "INSERT INTO skill_enforcement (tenant_id, item_id, level, set_at, set_by, reason) "
            "VALUES (:t, :i, :l, :at, :a, :r) ON CONFLICT (tenant_id, item_id) DO UPDATE SET "
            "level = EXCLUDED.level, set_at = EXCLUDED.set_at, set_by = EXCLUDED.set_by, "
            "reason = EXCLUDED.reason"
        ),
        {"t": tenant, "i": item_id, "l": level, "at": at, "a": actor, "r": reason},
    )


def upsert_citation(
    *,
    session: Session,
    tenant: str,
    case_id: str,
    item_id: int,
    influence: str,
    compliance: str,
    expected: Any,
    observed: Any,
    rationale: str | None,
    at: datetime,
    actor: str,
) -> None:
    """Store a citation (``expected``/``observed``: JSON values, ``None`` when not given);
    citing an item again in the same case replaces every field of the first."""
    session.execute(
        sa.text(
            "INSERT INTO citations (tenant_id, case_id, item_id, influence, compliance, "
            "expected, observed, rationale, cited_at, cited_by) "
            "VALUES (:t, :c, :i, :inf, :cmp, CAST(:exp AS jsonb), CAST(:obs AS jsonb), :why, "
            ":at, :a) ON CONFLICT (tenant_id, case_id, item_id) DO UPDATE SET "
            "influence = EXCLUDED.influence, compliance = EXCLUDED.compliance, "
            "expected = EXCLUDED.expected, observed = EXCLUDED.observed, "
            "rationale = EXCLUDED.rationale, "
            "cited_at = EXCLUDED.cited_at, cited_by = EXCLUDED.cited_by"
        ),
        {
            "t": tenant,
            "c": case_id,
            "i": item_id,
            "inf": influence,
            "cmp": compliance,
            "exp": None if expected is None else json.dumps(expected),
            "obs": None if observed is None else json.dumps(observed),
            "why": rationale,
            "at": at,
            "a": actor,
        },
    )


def signal_citations(
    *, session: Session, tenant: str, case_id: str, signal: str, at: datetime
) -> Sequence[sa.Row[Any]]:
    """Give every citation of the case its signal; returns ``(item_id, influence,
    compliance, recorded_at, redacted)`` of each, by item id."""
    return session.execute(
        sa.text(
            "WITH s AS (UPDATE citations SET signal = :s, signalled_at = :at "
            "  WHERE tenant_id = :t AND case_id = :c RETURNING item_id, influence, compliance) "
            "SELECT s.item_id, s.influence, s.compliance, i.recorded_at, "
            "  EXISTS (SELECT 1 FROM redactions r WHERE r.tenant_id = :t "
            "          AND r.item_id = s.item_id) AS redacted "
            "FROM s JOIN items i ON i.tenant_id = :t AND i.id = s.item_id ORDER BY s.item_id"
        ),
        {"t": tenant, "c": case_id, "s": signal, "at": at},
    ).all()


_CITATION_COLUMNS = (
    "ci.case_id, ci.item_id, ci.influence, ci.compliance, ci.cited_at, ci.cited_by, "
    "ci.signal, ci.expected, ci.observed, ci.rationale, ci.signalled_at"
)


def citations(*, session: Session, tenant: str, case_id: str) -> Sequence[sa.Row[Any]]:
    return session.execute(
        sa.text(
            f"SELECT {_CITATION_COLUMNS} FROM citations ci "
            "WHERE ci.tenant_id = :t AND ci.case_id = :c ORDER BY ci.item_id"
        ),
        {"t": tenant, "c": case_id},
    ).all()


def citation_page(
    *,
    session: Session,
    tenant: str,
    gate: dict[str, Any],
    filters: dict[str, Any],
    after: tuple[datetime, str, int] | None,
    limit: int,
) -> Sequence[sa.Row[Any]]:
    """Citations in ``(cited_at, case_id, item_id)`` order past the keyset ``after``,
    filtered (``filters``: ``case_id``, ``item_id``, ``influence``, ``compliance``,
    ``since`` inclusive, ``until`` not; ``None`` keeps any), of items (``gate``: the read
    gate's parameters, ``readable``'s ``:capabilities`` and ``:admin``) the reader may read (its
    ``capabilities``, or everything for the operator; never a redacted one): the gate
    is in the statement, before the limit, so what is hidden is neither listed nor
    counted. Each with the item's kind, subject and attribute."""
    start = after or (None, None, None)
    return session.execute(
        sa.text(
            f"SELECT {_CITATION_COLUMNS}, i.kind, i.subject, i.attribute "
            "FROM citations ci JOIN items i ON i.tenant_id = ci.tenant_id AND i.id = ci.item_id "
            "WHERE ci.tenant_id = :t "
            "AND (CAST(:case_id AS text) IS NULL OR ci.case_id = :case_id) "
            "AND (CAST(:item_id AS bigint) IS NULL OR ci.item_id = :item_id) "
            "AND (CAST(:influence AS text) IS NULL OR ci.influence = :influence) "
            "AND (CAST(:compliance AS text) IS NULL OR ci.compliance = :compliance) "
            "AND (CAST(:since AS timestamptz) IS NULL OR ci.cited_at >= :since) "
            "AND (CAST(:until AS timestamptz) IS NULL OR ci.cited_at < :until) "
            "AND (CAST(:after_at AS timestamptz) IS NULL OR (ci.cited_at, ci.case_id, ci.item_id) "
            "     > (CAST(:after_at AS timestamptz), CAST(:after_case AS text), "
            "        CAST(:after_item AS bigint))) "
            f"AND {readable('i', caps=':capabilities', admin=':admin')} "
            f"AND {private_visible('i')} "
            "ORDER BY ci.cited_at, ci.case_id, ci.item_id LIMIT :limit"
        ),
        {
            "t": tenant,
            **filters,
            "after_at": start[0],
            "after_case": start[1],
            "after_item": start[2],
            **gate,
            "limit": limit,
        },
    ).all()


# --- shadow log ------------------------------------------------------------------


def log_shadow(
    *,
    session: Session,
    tenant: str,
    case_id: str,
    ids: Sequence[int],
    matched: Sequence[bool],
    at: datetime,
) -> None:
    """One recall of a case in which shadow items passed every gate but their state."""
    if not ids:
        return
    session.execute(
        sa.text(
            "INSERT INTO shadow_log (tenant_id, item_id, case_id, first_at, last_at, recalls, "
            "matched_recalls, matched) "
            "SELECT :t, u.id, :c, :at, :at, 1, CASE WHEN u.m THEN 1 ELSE 0 END, u.m "
            "FROM unnest(CAST(:ids AS bigint[]), CAST(:m AS boolean[])) AS u(id, m) "
            "ON CONFLICT (tenant_id, item_id, case_id) DO UPDATE SET "
            "last_at = EXCLUDED.last_at, recalls = shadow_log.recalls + 1, "
            "matched_recalls = shadow_log.matched_recalls + EXCLUDED.matched_recalls, "
            "matched = shadow_log.matched OR EXCLUDED.matched"
        ),
        {"t": tenant, "c": case_id, "ids": list(ids), "m": list(matched), "at": at},
    )


def conclude_shadow(
    *, session: Session, tenant: str, case_id: str, outcome: str, at: datetime
) -> list[int]:
    """Fill in how the case concluded; ``agreed`` when a matched case concluded as the item's
    own case did (``confirmed`` when the item has no closed case of its own)."""
    rows = session.execute(
        sa.text(
            "UPDATE shadow_log s SET outcome = CAST(:o AS text), concluded_at = :at, agreed = CASE "
            "WHEN s.matched THEN CAST(:o AS text) = coalesce(("
            "  SELECT c.outcome FROM items i JOIN cases c ON c.tenant_id = i.tenant_id "
            "  AND i.scope_axis = 'case' AND c.id = i.scope_id "
            "  WHERE i.id = s.item_id AND c.status = 'closed'), 'confirmed') END "
            "WHERE s.tenant_id = :t AND s.case_id = :c RETURNING s.item_id"
        ),
        {"t": tenant, "c": case_id, "o": outcome, "at": at},
    ).all()
    return sorted(int(r[0]) for r in rows)


def shadow_stats(
    *, session: Session, tenant: str, ids: Sequence[int] | None
) -> Sequence[sa.Row[Any]]:
    """Per current shadow item: cases seen, matched concluded cases, agreeing ones."""
    return session.execute(
        sa.text(
            "SELECT i.id, i.subject, i.attribute, i.text, i.acl, i.deny, i.classification, "
            "count(s.case_id) AS cases, "
            "count(*) FILTER (WHERE s.matched AND s.outcome IS NOT NULL) AS matched, "
            "count(*) FILTER (WHERE s.matched AND s.outcome IS NULL) AS pending, "
            "count(*) FILTER (WHERE s.agreed) AS agreed "
            f"FROM {ITEMS} LEFT JOIN shadow_log s ON s.tenant_id = i.tenant_id "
            "  AND s.item_id = i.id "
            "WHERE i.tenant_id = :t AND cur.state = 'shadow' AND i.superseded_at IS NULL "
            "AND (CAST(:all AS boolean) OR i.id = ANY(:ids)) "
            "AND NOT EXISTS (SELECT 1 FROM redactions r "
            "  WHERE r.tenant_id = i.tenant_id AND r.item_id = i.id) "
            "GROUP BY i.tenant_id, i.id ORDER BY i.id"
        ),
        {"t": tenant, "all": ids is None, "ids": list(ids or ())},
    ).all()


# --- promotion across scopes -------------------------------------------------------


def dropped_items(*, session: Session, tenant: str, ids: Sequence[int]) -> set[int]:
    """Of ``ids``, the items that were ever dropped from shadow back to their case (a
    ``transition`` audit row from ``shadow`` to ``case``)."""
    if not ids:
        return set()
    rows = session.execute(
        sa.text(
            "SELECT DISTINCT item_id FROM audit_log WHERE tenant_id = :t "
            "AND action = 'transition' AND item_id = ANY(CAST(:ids AS bigint[])) "
            "AND detail->>'from' = 'shadow' AND detail->>'to' = 'case'"
        ),
        {"t": tenant, "ids": sorted(set(ids))},
    ).all()
    return {int(r[0]) for r in rows}


def keyed_items(
    *, session: Session, tenant: str, key: tuple[str, str, str, str] | None = None
) -> Sequence[sa.Row[Any]]:
    """Current, live, unredacted facts and skills (not episodes) of every scope but the
    tenant's own and working memory's (cases, agents, teams, ...), by key.

    ``key`` (subject, attribute, kind, cond_key) keeps only that key.
    """
    return session.execute(
        sa.text(
            "SELECT i.id, i.subject, i.attribute, i.kind, i.cond_key, i.required, i.excluded, "
            f"i.object, i.scope_axis, i.scope_id, cur.state, i.acl, i.deny, i.classification "
            f"FROM {ITEMS} "
            "WHERE i.tenant_id = :t AND i.scope_axis NOT IN ('tenant', 'session') "
            "AND i.kind NOT IN ('episode', 'block') AND i.superseded_at IS NULL "
            "AND cur.state NOT IN ('revoked', 'refuted', 'superseded', 'archived') "
            "AND NOT EXISTS (SELECT 1 FROM redactions r "
            "  WHERE r.tenant_id = i.tenant_id AND r.item_id = i.id) "
            "AND (CAST(:any AS boolean) OR (i.subject = :s AND i.attribute = :a "
            "     AND i.kind = :k AND i.cond_key = :ck)) "
            "ORDER BY i.subject, i.attribute, i.kind, i.cond_key, i.id"
        ),
        {
            "t": tenant,
            "any": key is None,
            "s": key[0] if key else None,
            "a": key[1] if key else None,
            "k": key[2] if key else None,
            "ck": key[3] if key else None,
        },
    ).all()


def sharing_a_key(*, session: Session, tenant: str, ids: Sequence[int]) -> set[int]:
    """Which of ``ids`` (case-scoped facts and skills) share their key (subject, attribute,
    kind, cond_key) with a current item of another case: the only ones a write can have
    made contested. Two statements for a whole batch, grouped here: rows a batch has
    just written carry no statistics, and a join of them was planned as a nested loop."""
    written = session.execute(
        sa.text(
            "SELECT id, subject, attribute, kind, cond_key, scope_id FROM items "
            "WHERE tenant_id = :t AND id = ANY(:ids) AND scope_axis = 'case' "
            "AND kind <> 'episode'"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()
    if not written:
        return set()
    scopes: dict[tuple[str, str, str, str], set[str]] = {}
    for r in session.execute(
        sa.text(
            "SELECT DISTINCT subject, attribute, kind, cond_key, scope_id FROM items "
            "WHERE tenant_id = :t AND scope_axis = 'case' AND superseded_at IS NULL "
            "AND kind <> 'episode' AND subject = ANY(:s) AND attribute = ANY(:a)"
        ),
        {
            "t": tenant,
            "s": sorted({r.subject for r in written}),
            "a": sorted({r.attribute for r in written}),
        },
    ):
        scopes.setdefault((r.subject, r.attribute, r.kind, r.cond_key), set()).add(r.scope_id)
    return {
        int(r.id)
        for r in written
        if len(scopes.get((r.subject, r.attribute, r.kind, r.cond_key), ())) > 1
    }


def key_of(*, session: Session, tenant: str, item_id: int) -> tuple[str, str, str, str] | None:
    """(subject, attribute, kind, cond_key) of an item."""
    row = session.execute(
        sa.text(
            "SELECT subject, attribute, kind, cond_key FROM items WHERE tenant_id = :t AND id = :i"
        ),
        {"t": tenant, "i": item_id},
    ).first()
    return None if row is None else (row[0], row[1], row[2], row[3])


# One statement moves every group: each row moves to its group's target when
# its state is one its group's action is defined from (the condition is
# re-checked on the latest row version if a concurrent transaction changed it
# first). ``previous = s.state`` reads the old value, so the row reports where
# it came from without a second scan. The history is the audit rows the
# caller appends for what moved. The state rows are found by probing the ids
# through the primary key (``= ANY``): joined to the id list alone, the planner
# hashed every state row of the tenant (an event's 10,000 moves took 0.31 to
# 0.41 s in a tenant of 600,000 items, 0.03 to 0.05 s this way).
_MOVE = """
WITH moved AS (
  UPDATE item_states s SET previous = s.state, state = u.target
  FROM {source}
  WHERE s.item_id = u.id AND s.tenant_id = :t
    AND s.item_id = ANY(CAST(:ids AS bigint[])) AND {allowed}
  RETURNING s.item_id, s.previous, u.g
)
SELECT item_id, previous, g FROM moved ORDER BY g, item_id
"""
_GROUPS = "(u.g || ':' || s.state) = ANY(:allowed)"
MOVE = sa.text(
    _MOVE.format(
        source="unnest(CAST(:ids AS bigint[]), CAST(:groups AS int[]), "
        "CAST(:targets AS text[])) AS u(id, g, target)",
        allowed=_GROUPS,
    )
)
# The same for a single move: a plain filter on the state.
MOVE_ONE = sa.text(
    _MOVE.format(
        source="(SELECT id, 1 AS g, CAST(:target AS text) AS target "
        "FROM unnest(CAST(:ids AS bigint[])) AS id) u",
        allowed="s.state = ANY(:sources)",
    )
)
# Revocation: the item (group 1) and its descendants (group 2), walked on the
# server, never sent to the client and back; the moved items' pending
# verify-on-next-use checks go in the same statement. The ids are one array
# probed through the primary key, so the work grows with the lineage, not with
# the tenant: joined to ``item_states`` instead, the planner hashed every state
# row of the tenant (a 100,000 lineage's move took 0.65 to 0.85 s in a tenant of
# 800,000 items, 0.33 to 0.40 s this way; docs/reliability.md, section 7).
_LINEAGE_GROUP = "(CASE WHEN s.item_id = :i THEN 1 ELSE 2 END)"
MOVE_LINEAGE = sa.text(
    f"WITH {_DESCENDANTS}, moved AS ("
    "  UPDATE item_states s SET previous = s.state, state = CASE WHEN s.item_id = :i"
    "    THEN CAST(:root_target AS text) ELSE CAST(:target AS text) END"
    "  WHERE s.tenant_id = :t AND s.item_id = ANY(ARRAY("
    "    SELECT CAST(:i AS bigint) UNION ALL SELECT id FROM d WHERE id <> :i))"
    f"  AND ({_LINEAGE_GROUP} || ':' || s.state) = ANY(:allowed)"
    f"  RETURNING s.item_id, s.previous, {_LINEAGE_GROUP} AS g"
    "), checks AS (DELETE FROM expiry_checks e USING moved m "
    "WHERE e.tenant_id = :t AND e.item_id = m.item_id) "
    "SELECT item_id, previous, g FROM moved ORDER BY g, item_id"
)


def move(*, session: Session, statement: sa.TextClause, params: dict[str, Any]) -> list[Any]:
    """Run one of the move statements; ``(item_id, previous, group)`` per moved item.

    On the driver's cursor, in the session's transaction: a revocation's
    100,000 rows come back as plain tuples, without a result row object each.
    """
    connection = session.connection()
    sql = str(statement.compile(dialect=connection.dialect))
    raw = connection.connection.driver_connection
    assert raw is not None
    with raw.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


def room_to_sort(*, session: Session) -> None:
    """Enough memory for this transaction's sorts and CTEs to stay off disk: a
    revocation sorts and returns 100,000 moved rows (about 7 MB; the default
    ``work_mem`` of 4 MB spills them to temporary files)."""
    session.execute(sa.text("SET LOCAL work_mem = '64MB'"))


def int_array(ids: Sequence[int]) -> str:
    """A bigint[] literal: psycopg adapts a long list element by element, slowly."""
    return "{" + ",".join(map(str, ids)) + "}"


# --- confidence (ranking only) ------------------------------------------------

# ``v·d(%(at)s - since)``. PostgreSQL raises on float8 underflow (``power(0.5, 1100)``, or
# a tiny ``v`` times a small decay), where Python gives 0: a term decayed past 100
# half-lives (under 8e-31 of itself) or smaller than 1e-200 reads as 0, so no product
# can underflow; the difference from Python's exact value is far below any tolerance.
_HALF_LIVES = (
    "(greatest(extract(epoch FROM (CAST(%(at)s AS timestamptz) - SINCE)), 0) "
    "/ CAST(%(conf_half_life_s)s AS float8))"
)
_DECAYED = (
    "(CASE WHEN abs(VALUE) < 1e-200 OR HALF_LIVES > 100 THEN CAST(0 AS float8) "
    "ELSE VALUE * power(CAST(0.5 AS float8), HALF_LIVES) END)"
)


def _decayed(value: str, since: str) -> str:
    return _DECAYED.replace("HALF_LIVES", _HALF_LIVES.replace("SINCE", since)).replace(
        "VALUE", value
    )


#: The SQL twin of ``lifecycle.confidence_at`` (and, for an item with no row, of the
#: decayed prior ``lifecycle.initial_score``): the confidence at ``%(at)s`` of item ``{i}``
#: (a row with ``recorded_at``) whose ``item_confidence`` row is ``{c}`` (all NULL when it
#: has none), for ``str.format`` with the two aliases, with psycopg's pyformat parameters
#: of ``lifecycle.confidence_params``. Elapsed time is clamped at zero, as in Python.
CONFIDENCE_SQL = (
    "(CAST(%(conf_floor)s AS float8) + (1 - CAST(%(conf_floor)s AS float8)) "
    "* least(CAST(1 AS float8), greatest(CAST(0 AS float8), "
    "CASE WHEN {c}.score IS NULL THEN "
    + _decayed("CAST(%(conf_prior)s AS float8)", "{i}.recorded_at")
    + " ELSE "
    + _decayed("{c}.score", "{c}.at")
    + " END)))"
)


def ensure_confidence(
    *, session: Session, tenant: str, item_id: int, score: float, at: datetime
) -> None:
    """Give the item its ``item_confidence`` row (``score`` as of ``at``) unless it has one."""
    session.execute(
        sa.text(
            "INSERT INTO item_confidence (tenant_id, item_id, score, at) "
            "VALUES (:t, :i, :s, :at) ON CONFLICT (tenant_id, item_id) DO NOTHING"
        ),
        {"t": tenant, "i": item_id, "s": score, "at": at},
    )


def confidence_row(
    *, session: Session, tenant: str, item_id: int, lock: bool = False
) -> tuple[float, datetime] | None:
    """The item's stored ``(score, at)``; with ``lock``, the row stays locked until the
    transaction ends."""
    suffix = " FOR UPDATE" if lock else ""
    row = session.execute(
        sa.text(
            f"SELECT score, at FROM item_confidence WHERE tenant_id = :t AND item_id = :i{suffix}"
        ),
        {"t": tenant, "i": item_id},
    ).first()
    return None if row is None else (float(row.score), row.at)


def set_confidence(
    *, session: Session, tenant: str, item_id: int, score: float, at: datetime
) -> None:
    session.execute(
        sa.text(
            "UPDATE item_confidence SET score = :s, at = :at WHERE tenant_id = :t AND item_id = :i"
        ),
        {"t": tenant, "i": item_id, "s": score, "at": at},
    )


def insert_evidence_link(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    evidence_id: str,
    stance: str,
    strength: float,
    source_kind: str,
    at: datetime,
    actor: str,
) -> int:
    """Insert one link; returns its id."""
    return int(
        session.execute(
            sa.text(
                "INSERT INTO evidence_links (tenant_id, item_id, evidence_id, stance, strength, "
                "source_kind, at, actor) VALUES (:t, :i, :e, :stance, :strength, :kind, :at, :a) "
                "RETURNING id"
            ),
            {
                "t": tenant,
                "i": item_id,
                "e": evidence_id,
                "stance": stance,
                "strength": strength,
                "kind": source_kind,
                "at": at,
                "a": actor,
            },
        ).scalar_one()
    )


def evidence_links(*, session: Session, tenant: str, item_id: int) -> Sequence[sa.Row[Any]]:
    """The item's links ``(id, evidence_id, stance, strength, source_kind, at, actor)``,
    in the order they were attached."""
    return session.execute(
        sa.text(
            "SELECT id, evidence_id, stance, strength, source_kind, at, actor "
            "FROM evidence_links WHERE tenant_id = :t AND item_id = :i ORDER BY at, id"
        ),
        {"t": tenant, "i": item_id},
    ).all()


# --- the SME's review: re-opened items, an item's citations and evidence ---------------


def reopened_items(*, session: Session, tenant: str, gate: dict[str, Any]) -> Sequence[sa.Row[Any]]:
    """Current, unredacted items in ``needs_reverification`` or ``verify_on_next_use``, each
    with its newest transition (the event, check or revocation that put it there); never
    another principal's working memory (``gate``: the reader's ``Actor.gate_params``)."""
    return session.execute(
        sa.text(
            "SELECT i.id, i.subject, i.attribute, i.text, cur.state, "
            "i.acl, i.deny, i.classification, "
            "t.at, t.actor, t.reason, t.cause "
            f"FROM {ITEMS} LEFT JOIN LATERAL (SELECT tr.at, tr.actor, tr.reason, tr.cause "
            f"  FROM {TRANSITIONS} tr WHERE tr.tenant_id = i.tenant_id AND tr.item_id = i.id "
            "  ORDER BY tr.seq DESC LIMIT 1) t ON true "
            "WHERE i.tenant_id = :t AND i.superseded_at IS NULL "
            "AND cur.state IN ('needs_reverification', 'verify_on_next_use') "
            "AND NOT EXISTS (SELECT 1 FROM redactions r "
            "  WHERE r.tenant_id = i.tenant_id AND r.item_id = i.id) "
            f"AND {private_visible('i')} "
            "ORDER BY t.at DESC NULLS LAST, i.id"
        ),
        {**gate, "t": tenant},
    ).all()


def item_citations(*, session: Session, tenant: str, item_id: int) -> Sequence[sa.Row[Any]]:
    """The item's citations in every case, oldest first."""
    return session.execute(
        sa.text(
            f"SELECT {_CITATION_COLUMNS} FROM citations ci "
            "WHERE ci.tenant_id = :t AND ci.item_id = :i ORDER BY ci.cited_at, ci.case_id"
        ),
        {"t": tenant, "i": item_id},
    ).all()


def evidence_sources(*, session: Session, tenant: str, ids: Sequence[str]) -> Sequence[sa.Row[Any]]:
    """Registered evidence ``(id, title, uri, readers, test_outcome)`` among ``ids``."""
    return session.execute(
        sa.text(
            "SELECT id, title, uri, readers, test_outcome FROM evidence "
            "WHERE tenant_id = :t AND id = ANY(:ids) ORDER BY id"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()


def refusals(
    *, session: Session, tenant: str, since: datetime, limit: int
) -> Sequence[sa.Row[Any]]:
    """The newest refused writes and proposals since ``since`` (duplicates are not refusals):
    ``(seq, at, actor, code, gate, message, subject, attribute)``."""
    return session.execute(
        sa.text(
            "SELECT seq, at, actor, code, detail->>'gate' AS gate, detail->>'message' AS message, "
            "detail->'request'->>'subject' AS subject, "
            "detail->'request'->>'attribute' AS attribute FROM audit_log "
            "WHERE tenant_id = :t AND action IN ('reject', 'rejected') "
            "AND code IS DISTINCT FROM 'duplicate_no_change' AND at >= :since "
            "ORDER BY seq DESC LIMIT :n"
        ),
        {"t": tenant, "since": since, "n": limit},
    ).all()


def item_scopes(
    *, session: Session, tenant: str, ids: Sequence[int], gate: dict[str, Any]
) -> Sequence[sa.Row[Any]]:
    """``(id, scope_id, acl, deny, classification)`` of the items among ``ids``, never
    another principal's working memory (``gate``: the reader's ``Actor.gate_params``)."""
    return session.execute(
        sa.text(
            "SELECT i.id, i.scope_id, i.acl, i.deny, i.classification FROM items i "
            f"WHERE i.tenant_id = :t AND i.id = ANY(:ids) AND {private_visible('i')}"
        ),
        {**gate, "t": tenant, "ids": list(ids)},
    ).all()


def awaiting_outcome(*, session: Session, tenant: str) -> Sequence[sa.Row[Any]]:
    """Open cases whose sender reported them over without an outcome (an
    ``awaiting_outcome`` audit row names the case; model §2.2), oldest report first:
    ``(id, subjects, opened_at, reported_at, reported_by)`` of the first report."""
    return session.execute(
        sa.text(
            "SELECT c.id, c.subjects, c.opened_at, a.at AS reported_at, a.actor AS reported_by "
            "FROM cases c JOIN (SELECT DISTINCT ON (detail->>'case') detail->>'case' AS case_id, "
            "  at, actor FROM audit_log WHERE tenant_id = :t AND action = 'awaiting_outcome' "
            "  ORDER BY detail->>'case', seq) a ON a.case_id = c.id "
            "WHERE c.tenant_id = :t AND c.status = 'open' ORDER BY a.at, c.id"
        ),
        {"t": tenant},
    ).all()


def cited_items(
    *, session: Session, tenant: str, case_ids: Sequence[str], gate: dict[str, Any]
) -> Sequence[sa.Row[Any]]:
    """``(case_id, item_id, acl, deny, classification)`` of the unredacted items the cases
    cited, never another principal's working memory (``gate``: the reader's
    ``Actor.gate_params``)."""
    return session.execute(
        sa.text(
            "SELECT ci.case_id, ci.item_id, i.acl, i.deny, i.classification "
            "FROM citations ci JOIN items i "
            "ON i.tenant_id = ci.tenant_id AND i.id = ci.item_id "
            "WHERE ci.tenant_id = :t AND ci.case_id = ANY(:c) AND NOT EXISTS (SELECT 1 "
            "FROM redactions r WHERE r.tenant_id = ci.tenant_id AND r.item_id = ci.item_id) "
            f"AND {private_visible('i')} "
            "ORDER BY ci.case_id, ci.item_id"
        ),
        {**gate, "t": tenant, "c": list(case_ids)},
    ).all()


def conditioned_active_items(*, session: Session, tenant: str) -> Sequence[sa.Row[Any]]:
    """Current, unredacted ``active`` items with at least one condition (full rows): the
    ones whose conditions can be false now."""
    return session.execute(
        sa.text(
            f"SELECT {ITEM_COLUMNS} FROM {ITEMS} "
            "WHERE i.tenant_id = :t AND i.superseded_at IS NULL AND cur.state = 'active' "
            "AND (cardinality(i.required) > 0 OR cardinality(i.excluded) > 0) "
            "AND NOT EXISTS (SELECT 1 FROM redactions r "
            "  WHERE r.tenant_id = i.tenant_id AND r.item_id = i.id) "
            "ORDER BY i.subject, i.attribute, i.id"
        ),
        {"t": tenant},
    ).all()


def item_names(*, session: Session, tenant: str, ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """The subject and attribute of each of ``ids``."""
    if not ids:
        return {}
    rows = session.execute(
        sa.text("SELECT id, subject, attribute FROM items WHERE tenant_id = :t AND id = ANY(:ids)"),
        {"t": tenant, "ids": list(ids)},
    ).all()
    return {int(r.id): (str(r.subject), str(r.attribute)) for r in rows}


# --- erasure (forget, model §7) ---------------------------------------------------------

#: The tables that hold an item's derived rows (by ``item_id``), deleted by an erasure:
#: its embeddings and their queue, its use, cases' contexts and citations of it, shadow
#: and expiry bookkeeping, evidence links, confidence, enforcement.
ITEM_COPIES = (
    "item_embeddings",
    "embed_queue",
    "item_usage",
    "case_context",
    "citations",
    "shadow_log",
    "expiry_checks",
    "evidence_links",
    "item_confidence",
    "skill_enforcement",
)


def erasure_closure(*, session: Session, tenant: str, ids: Sequence[int]) -> list[int]:
    """``ids`` that exist, with the rows each superseded, transitively (its history),
    less those already forgotten (redacted under an erasure)."""
    rows = session.execute(
        sa.text(
            "WITH RECURSIVE chain(id) AS ("
            "  SELECT id FROM items WHERE tenant_id = :t AND id = ANY(CAST(:ids AS bigint[])) "
            "  UNION SELECT p.id FROM items p JOIN chain c "
            "  ON p.tenant_id = :t AND p.superseded_by = c.id) "
            "SELECT id FROM chain WHERE NOT EXISTS (SELECT 1 FROM redactions x "
            "  WHERE x.tenant_id = :t AND x.item_id = chain.id AND x.erasure_id IS NOT NULL) "
            "ORDER BY id"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()
    return [int(r[0]) for r in rows]


def erasure_breakdown(
    *, session: Session, tenant: str, ids: Sequence[int]
) -> Sequence[sa.Row[Any]]:
    """``(subject, anchor, n)`` of the rows ``ids``, the anchor ``axis:id`` of its scope."""
    return session.execute(
        sa.text(
            "SELECT subject, scope_axis || ':' || scope_id AS anchor, count(*) AS n FROM items "
            "WHERE tenant_id = :t AND id = ANY(CAST(:ids AS bigint[])) "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()


def erasure_descendants(*, session: Session, tenant: str, ids: Sequence[int]) -> list[int]:
    """Items derived from ``ids`` (the lineage closure) that are not among them."""
    rows = session.execute(
        sa.text(
            "SELECT DISTINCT descendant_id FROM item_ancestry WHERE tenant_id = :t "
            "AND ancestor_id = ANY(CAST(:ids AS bigint[])) "
            "AND NOT descendant_id = ANY(CAST(:ids AS bigint[])) ORDER BY 1"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()
    return [int(r[0]) for r in rows]


def erasure_texts(*, session: Session, tenant: str, ids: Sequence[int], shortest: int) -> list[str]:
    """The items' texts, and their objects that are strings, of at least ``shortest``
    characters: what an audit row about no item (a request, a refusal) may quote."""
    rows = session.execute(
        sa.text(
            "SELECT DISTINCT v FROM items i CROSS JOIN LATERAL (VALUES (i.text), "
            "  (CASE WHEN jsonb_typeof(i.object -> 'value') = 'string' "
            "   THEN i.object ->> 'value' END), "
            "  (CASE WHEN jsonb_typeof(i.object #> '{value,v}') = 'string' "
            "   THEN i.object #>> '{value,v}' END)) x(v) "
            "WHERE i.tenant_id = :t AND i.id = ANY(CAST(:ids AS bigint[])) "
            "AND length(v) >= :n ORDER BY 1"
        ),
        {"t": tenant, "ids": list(ids), "n": shortest},
    ).all()
    return [str(r[0]) for r in rows]


def erasure_audit_rows(
    *,
    session: Session,
    tenant: str,
    ids: Sequence[int],
    texts: Sequence[str],
    subject: str | None,
) -> list[int]:
    """The seqs of the audit rows whose detail an erasure of ``ids`` removes (those not
    erased yet; never an erasure's own row): every row about one of the items, the
    ``proposed`` row each came from (``proposal_seq``), every other row (about no item,
    or about another: a request, a refusal, a citation's rationale) one of whose string
    values holds one of ``texts`` (as a substring), and, for a subject's erasure, a
    request or proposal for ``subject``. ``forget`` and ``rechain`` rows are never
    erased."""
    rows = session.execute(
        sa.text(
            "WITH about AS (SELECT seq, detail FROM audit_log WHERE tenant_id = :t "
            "  AND item_id = ANY(CAST(:ids AS bigint[])) AND action NOT IN ('forget', 'rechain')) "
            "SELECT seq FROM about WHERE detail IS NOT NULL "
            "UNION SELECT a.seq FROM audit_log a WHERE a.tenant_id = :t "
            "  AND a.detail IS NOT NULL AND a.action <> 'forget' AND a.seq IN ("
            "    SELECT CAST(detail->>'proposal_seq' AS bigint) FROM about "
            "    WHERE detail->>'proposal_seq' ~ '^[0-9]{1,18}$') "
            "UNION SELECT a.seq FROM audit_log a "
            "  CROSS JOIN LATERAL jsonb_path_query(a.detail, 'strict $.**') x(v) "
            "  JOIN (SELECT DISTINCT unnest(CAST(:texts AS text[])) AS s) q "
            "  ON position(q.s IN x.v #>> '{}') > 0 "
            "  WHERE a.tenant_id = :t AND a.detail IS NOT NULL "
            "  AND a.action NOT IN ('forget', 'rechain') AND jsonb_typeof(x.v) = 'string' "
            "UNION SELECT a.seq FROM audit_log a WHERE a.tenant_id = :t AND a.item_id IS NULL "
            "  AND a.detail IS NOT NULL AND a.action <> 'forget' AND ("
            "    a.detail #>> '{request,subject}' = :subject "
            "    OR a.detail #>> '{proposal,subject}' = :subject) "
            "ORDER BY 1"
        ),
        {"t": tenant, "ids": list(ids), "texts": list(texts), "subject": subject},
    ).all()
    return [int(r[0]) for r in rows]


def scrub_items(*, session: Session, tenant: str, ids: Sequence[int], at: datetime) -> int:
    """Remove the content of item rows ``ids``: text, object, entities, conditions (and
    their key), the full-text vector; the row leaves the current set (no write finds it
    to supersede). What stays is structural: id, kind, subject, attribute, anchors,
    evidence ids, ACL, instants, who wrote it."""
    result = session.execute(
        sa.text(
            "UPDATE items SET text = NULL, object = CAST('{\"value\": null}' AS jsonb), "
            "entities = '{}', required = '{}', excluded = '{}', "
            'conditions = CAST(\'{"required": [], "excluded": []}\' AS jsonb), '
            "cond_key = 'forgotten:' || id, key_digest = NULL, fts = NULL, "
            "superseded_at = coalesce(superseded_at, :at) "
            "WHERE tenant_id = :t AND id = ANY(CAST(:ids AS bigint[]))"
        ),
        {"t": tenant, "ids": list(ids), "at": at},
    )
    return int(cast(sa.CursorResult[Any], result).rowcount)


def delete_item_copies(*, session: Session, tenant: str, ids: Sequence[int]) -> dict[str, int]:
    """Delete the rows of ``ITEM_COPIES`` for items ``ids``; the count per table."""
    out: dict[str, int] = {}
    for table in ITEM_COPIES:
        result = session.execute(
            sa.text(
                f"DELETE FROM {table} WHERE tenant_id = :t "
                "AND item_id = ANY(CAST(:ids AS bigint[]))"
            ),
            {"t": tenant, "ids": list(ids)},
        )
        out[table] = int(cast(sa.CursorResult[Any], result).rowcount)
    return out


def may_maintain(*, connection: sa.Connection, tables: Sequence[str]) -> list[str]:
    """Those of ``tables`` the connected role may not ``VACUUM`` (not the owner, no
    ``MAINTAIN`` privilege: PostgreSQL 17 and later; before 17 the ``CASE`` keeps the
    privilege's name, which the server would refuse, from being read)."""
    rows = connection.execute(
        sa.text(
            "SELECT t FROM unnest(CAST(:tables AS text[])) t WHERE NOT (pg_has_role("
            "  (SELECT relowner FROM pg_class WHERE oid = CAST(t AS regclass)), 'MEMBER') "
            "  OR CASE WHEN current_setting('server_version_num')::int >= 170000 "
            "      THEN has_table_privilege(CAST(t AS regclass), 'MAINTAIN') ELSE false END) "
            "ORDER BY 1"
        ),
        {"tables": list(tables)},
    ).all()
    return [str(r[0]) for r in rows]


def vacuum(
    *, connection: sa.Connection, table: str, full: bool, analyze: bool, lock_timeout_ms: int
) -> str | None:
    """``VACUUM`` ``table`` (``FULL``: rewritten into new files, its indexes rebuilt, the
    old files removed; plain ``VACUUM`` frees dead row versions but leaves their bytes in
    the pages' free space; ``ANALYZE``: its statistics sampled anew). Outside a
    transaction: ``connection`` is in autocommit. None when done; else why not: the
    table's lock was not had within ``lock_timeout_ms``, or the server's error."""
    verb = ", ".join(v for v, on in (("FULL", full), ("ANALYZE", analyze)) if on)
    try:
        connection.execute(sa.text(f"SET lock_timeout = {int(lock_timeout_ms)}"))
        try:
            connection.execute(sa.text(f"VACUUM {f'({verb}) ' if verb else ''}{table}"))
        finally:
            connection.execute(sa.text("RESET lock_timeout"))
    except sa.exc.DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) == "55P03":  # lock_not_available
            return f"its lock was not had within {int(lock_timeout_ms) // 1000} s"
        return str(exc.orig or exc).strip().splitlines()[0]
    return None
