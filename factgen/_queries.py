"""All SQL of factgen. Functions take the session as a keyword; callers own the transaction."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

__all__: list[str] = []


def tenant_policy(*, session: Session, tenant: str) -> dict[str, Any] | None:
    row = session.execute(
        sa.text("SELECT policy FROM tenants WHERE id = :t"), {"t": tenant}
    ).first()
    return None if row is None else dict(row[0])


def registry_declared(*, session: Session, tenant: str) -> dict[str, Any]:
    """The tenant's declared registry (migration 0022) as stored, ``{}`` when none."""
    row = session.execute(
        sa.text("SELECT declared FROM tenant_registry WHERE tenant_id = :t"), {"t": tenant}
    ).first()
    return {} if row is None else dict(row[0])


def world_version(*, session: Session, tenant: str) -> int | None:
    """The tenant's world version (migration 0008), or None for an unknown tenant. On the
    session's psycopg connection, prepared: it is asked before every runtime call."""
    raw = session.connection().connection.driver_connection
    assert raw is not None
    row = raw.execute("SELECT world_version FROM tenants WHERE id = %s", [tenant]).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def upsert_tenant(*, session: Session, tenant: str, policy: dict[str, Any], now: datetime) -> None:
    session.execute(
        sa.text(
            "INSERT INTO tenants (id, policy, created_at) VALUES (:t, CAST(:p AS jsonb), :now) "
            "ON CONFLICT (id) DO UPDATE SET policy = EXCLUDED.policy"
        ),
        {"t": tenant, "p": json.dumps(policy), "now": now},
    )


def lock_tenant_policy(*, session: Session, tenant: str) -> dict[str, Any] | None:
    """The tenant's current policy, its row locked until the transaction ends (a policy
    change reads, checks and writes under it: two changes never interleave)."""
    row = session.execute(
        sa.text("SELECT policy FROM tenants WHERE id = :t FOR UPDATE"), {"t": tenant}
    ).first()
    return None if row is None else dict(row[0])


def set_tenant_policy(*, session: Session, tenant: str, policy: dict[str, Any]) -> None:
    session.execute(
        sa.text("UPDATE tenants SET policy = CAST(:p AS jsonb) WHERE id = :t"),
        {"t": tenant, "p": json.dumps(policy)},
    )


def classification_levels_in_use(*, session: Session, tenant: str) -> dict[str, list[str]]:
    """Each classification level name the tenant's rows use, with where: ``evidence`` and
    ``items`` (their ``classification``), ``principals`` and ``tokens`` (their
    ``clearance``; a revoked token's is not in use). Every row is counted, history
    included: an as-of read still reads a superseded item's level."""
    rows = session.execute(
        sa.text(
            "SELECT DISTINCT classification AS level, 'evidence' AS used_by FROM evidence "
            "WHERE tenant_id = :t AND classification IS NOT NULL "
            "UNION SELECT DISTINCT classification, 'items' FROM items "
            "WHERE tenant_id = :t AND classification IS NOT NULL "
            "UNION SELECT DISTINCT clearance, 'principals' FROM principals WHERE tenant_id = :t "
            "UNION SELECT DISTINCT clearance, 'tokens' FROM api_tokens "
            "WHERE tenant_id = :t AND clearance IS NOT NULL AND revoked_at IS NULL "
            "ORDER BY 1, 2"
        ),
        {"t": tenant},
    ).all()
    out: dict[str, list[str]] = {}
    for level, used_by in rows:
        out.setdefault(str(level), []).append(str(used_by))
    return out


def add_policy_version(
    *, session: Session, tenant: str, policy: dict[str, Any], at: datetime, by: str
) -> int:
    """Append the tenant's next policy version (1 for its first); returns its number."""
    return int(
        session.execute(
            sa.text(
                "INSERT INTO tenant_policy_versions (tenant_id, version, policy, set_at, set_by) "
                "SELECT CAST(:t AS varchar), COALESCE(max(version), 0) + 1, "
                "CAST(:p AS jsonb), :at, :by "
                "FROM tenant_policy_versions WHERE tenant_id = :t RETURNING version"
            ),
            {"t": tenant, "p": json.dumps(policy), "at": at, "by": by},
        ).scalar_one()
    )


def policy_version(*, session: Session, tenant: str, at: datetime | None) -> sa.Row[Any] | None:
    """The tenant's policy version in force at ``at`` (None: the newest): the last one
    set at or before it."""
    return session.execute(
        sa.text(
            "SELECT version, policy, set_at, set_by FROM tenant_policy_versions "
            "WHERE tenant_id = :t AND (CAST(:at AS timestamptz) IS NULL OR set_at <= :at) "
            "ORDER BY version DESC LIMIT 1"
        ),
        {"t": tenant, "at": at},
    ).first()


def tenant_created_at(*, session: Session, tenant: str) -> datetime | None:
    return session.execute(
        sa.text("SELECT created_at FROM tenants WHERE id = :t"), {"t": tenant}
    ).scalar()


def schema_rows(*, session: Session, tenant: str) -> Sequence[sa.Row[Any]]:
    return session.execute(
        sa.text(
            "SELECT attribute, type, unit, max_age, content_type FROM fact_schema "
            "WHERE tenant_id = :t ORDER BY attribute"
        ),
        {"t": tenant},
    ).all()


def upsert_attributes(
    *,
    session: Session,
    tenant: str,
    rows: Iterable[tuple[str, str, str | None, timedelta | None, str | None]],
) -> None:
    params = [{"t": tenant, "a": a, "ty": ty, "u": u, "m": m, "c": c} for a, ty, u, m, c in rows]
    if params:
        session.execute(
            sa.text(
                "INSERT INTO fact_schema (tenant_id, attribute, type, unit, max_age, content_type) "
                "VALUES (:t, :a, :ty, :u, :m, :c) ON CONFLICT (tenant_id, attribute) DO UPDATE "
                "SET type = EXCLUDED.type, unit = EXCLUDED.unit, max_age = EXCLUDED.max_age, "
                "content_type = EXCLUDED.content_type"
            ),
            params,
        )


def alias_rows(*, session: Session, tenant: str) -> Sequence[sa.Row[Any]]:
    return session.execute(
        sa.text("SELECT alias, entity_id FROM entity_aliases WHERE tenant_id = :t"), {"t": tenant}
    ).all()


def edge_rows(*, session: Session, tenant: str) -> Sequence[sa.Row[Any]]:
    return session.execute(
        sa.text("SELECT src, relation, dst FROM entity_edges WHERE tenant_id = :t"), {"t": tenant}
    ).all()


def upsert_entities(
    *,
    session: Session,
    tenant: str,
    entities: Iterable[tuple[str, str]],
    aliases: Iterable[tuple[str, str]],
    edges: Iterable[tuple[str, str, str]],
) -> None:
    ents = [{"t": tenant, "id": i, "k": k} for i, k in entities]
    if ents:
        session.execute(
            sa.text(
                "INSERT INTO entities (tenant_id, id, kind) VALUES (:t, :id, :k) "
                "ON CONFLICT (tenant_id, id) DO UPDATE SET kind = EXCLUDED.kind"
            ),
            ents,
        )
    als = [{"t": tenant, "a": a, "e": e} for a, e in aliases]
    if als:
        session.execute(
            sa.text(
                "INSERT INTO entity_aliases (tenant_id, alias, entity_id) VALUES (:t, :a, :e) "
                "ON CONFLICT (tenant_id, alias) DO UPDATE SET entity_id = EXCLUDED.entity_id"
            ),
            als,
        )
    eds = [{"t": tenant, "s": s, "r": r, "d": d} for s, r, d in edges]
    if eds:
        session.execute(
            sa.text(
                "INSERT INTO entity_edges (tenant_id, src, relation, dst) "
                "VALUES (:t, :s, :r, :d) ON CONFLICT DO NOTHING"
            ),
            eds,
        )


def insert_facts(
    *,
    session: Session,
    tenant: str,
    recorded_at: datetime,
    rows: Sequence[tuple[str, str, str, datetime, str | None, Any]],
) -> None:
    """Insert a batch of facts of ``tenant`` recorded at ``recorded_at`` in one statement:
    ``rows`` are (subject, attribute, the encoded value as JSON text, observed_at, source,
    provenance), in the order their ids are drawn. On the session's psycopg connection,
    each column one array (``unnest``), sent in binary: a pull of 5,000 samples was
    5,000 executions of an INSERT, then one JSON array of rows that the client wrote
    and the server took apart field by field. A provenance shared by many rows (one
    query's samples) is sent and parsed once. (``COPY`` is not an option: PostgreSQL
    refuses ``COPY FROM`` into a table under row-level security.)"""
    if not rows:
        return
    index: dict[int, int] = {}  # id of a provenance mapping -> its 1-based place
    provenances: list[str] = []

    def place(p: Any) -> int | None:
        if p is None:
            return None
        at = index.get(id(p))
        if at is None:
            provenances.append(json.dumps(dict(p)))
            at = index[id(p)] = len(provenances)
        return at

    raw = session.connection().connection.driver_connection
    assert raw is not None
    raw.execute(
        "INSERT INTO facts (tenant_id, subject, attribute, value, observed_at, "
        "recorded_at, source, provenance) "
        "SELECT %(t)b, r.subject, r.attribute, CAST(r.value AS jsonb), r.observed_at, "
        "%(rec)b, r.source, p.provenance[r.p] "
        "FROM unnest(%(subject)b::text[], %(attribute)b::text[], %(value)b::text[], "
        "%(observed)b::timestamptz[], %(source)b::text[], %(place)b::int[]) "
        "WITH ORDINALITY AS r(subject, attribute, value, observed_at, source, p, n), "
        "(SELECT CAST(%(provenance)b AS jsonb[]) AS provenance) AS p "
        "ORDER BY r.n",
        {
            "t": tenant,
            "rec": recorded_at,
            "subject": [r[0] for r in rows],
            "attribute": [r[1] for r in rows],
            "value": [r[2] for r in rows],
            "observed": [r[3] for r in rows],
            "source": [r[4] for r in rows],
            "place": [place(r[5]) for r in rows],
            "provenance": provenances,
        },
    )


def latest_facts(
    *,
    session: Session,
    tenant: str,
    subjects: Sequence[str] | None,
    at: datetime,
    recorded_by: datetime,
) -> Sequence[sa.Row[Any]]:
    """Latest observation per (subject, attribute) observed by ``at``, known by ``recorded_by``."""
    return session.execute(
        sa.text(
            "SELECT DISTINCT ON (subject, attribute) subject, attribute, value, observed_at, "
            "source FROM facts WHERE tenant_id = :t "
            "AND (CAST(:all_subjects AS boolean) OR subject = ANY(:subjects)) "
            "AND observed_at <= :at AND recorded_at <= :rec "
            "ORDER BY subject, attribute, observed_at DESC, id DESC"
        ),
        {
            "t": tenant,
            "all_subjects": subjects is None,
            "subjects": list(subjects or []),
            "at": at,
            "rec": recorded_by,
        },
    ).all()


def latest_facts_text(
    *,
    session: Session,
    tenant: str,
    subjects: Sequence[str] | None,
    at: datetime,
    recorded_by: datetime,
) -> list[tuple[Any, ...]]:
    """Like ``latest_facts`` but the value as its type tag and the text of ``v``.

    ``(subject, attribute, t, jsonb_typeof(v), v_text, observed_at, source, provenance)``
    tuples, fetched on
    the session's own psycopg connection: no JSON parsing, no row objects (the
    snapshot is on the recall hot path).
    """
    raw = session.connection().connection.driver_connection
    assert raw is not None
    with raw.cursor() as cur:
        cur.execute(
            "SELECT DISTINCT ON (subject, attribute) subject, attribute, value ->> 't', "
            "jsonb_typeof(value -> 'v'), value ->> 'v', observed_at, source, provenance "
            "FROM facts WHERE tenant_id = %(t)s "
            "AND (%(all_subjects)s OR subject = ANY(%(subjects)s)) "
            "AND observed_at <= %(at)s AND recorded_at <= %(rec)s "
            "ORDER BY subject, attribute, observed_at DESC, id DESC",
            {
                "t": tenant,
                "all_subjects": subjects is None,
                "subjects": list(subjects or []),
                "at": at,
                "rec": recorded_by,
            },
        )
        rows: list[tuple[Any, ...]] = cur.fetchall()
        return rows


def current_facts_text(
    *, session: Session, tenant: str, subjects: Sequence[str], at: datetime
) -> tuple[list[tuple[Any, ...]], set[str]]:
    """``latest_facts_text`` of ``subjects`` read from ``facts_current`` (one probe per
    subject), and the subjects whose latest observation is later than ``at``, whose
    answer only the history (``latest_facts_text``) has."""
    raw = session.connection().connection.driver_connection
    assert raw is not None
    with raw.cursor() as cur:
        cur.execute(
            "SELECT subject, attribute, value ->> 't', jsonb_typeof(value -> 'v'), "
            "value ->> 'v', observed_at, source, provenance, "
            "(observed_at > %(at)s OR recorded_at > %(at)s) AS later "
            "FROM facts_current WHERE tenant_id = %(t)s "
            "AND subject = ANY(CAST(%(subjects)s AS text[]))",
            {"t": tenant, "subjects": list(subjects), "at": at},
        )
        rows: list[tuple[Any, ...]] = cur.fetchall()
    later = {r[0] for r in rows if r[8]}
    return [r[:8] for r in rows if r[0] not in later], later


def insert_event(*, session: Session, row: dict[str, Any]) -> int | None:
    """Insert one event; None when ``external_id`` is already taken in the tenant."""
    found = session.execute(
        sa.text(
            "INSERT INTO events (tenant_id, external_id, type, subjects, changes, principal, "
            "occurred_at, recorded_at, source) VALUES (:tenant_id, :external_id, :type, "
            ":subjects, CAST(:changes AS jsonb), :principal, :occurred_at, :recorded_at, :source) "
            "ON CONFLICT (tenant_id, external_id) WHERE external_id IS NOT NULL DO NOTHING "
            "RETURNING id"
        ),
        {**row, "changes": json.dumps(row["changes"])},
    ).first()
    return None if found is None else int(found[0])


def events_between(
    *,
    session: Session,
    tenant: str,
    since: datetime | None,
    until: datetime,
    types: Sequence[str] | None,
    subjects: Sequence[str] | None,
) -> Sequence[sa.Row[Any]]:
    """Events with ``since < occurred_at <= until``, oldest first."""
    return session.execute(
        sa.text(
            "SELECT id, tenant_id, external_id, type, subjects, changes, principal, "
            "occurred_at, recorded_at, source FROM events WHERE tenant_id = :t "
            "AND (CAST(:since AS timestamptz) IS NULL OR occurred_at > :since) "
            "AND occurred_at <= :until "
            "AND (CAST(:all_types AS boolean) OR type = ANY(:types)) "
            "AND (CAST(:all_subjects AS boolean) OR subjects && CAST(:subjects AS text[])) "
            "ORDER BY occurred_at, id"
        ),
        {
            "t": tenant,
            "since": since,
            "until": until,
            "all_types": types is None,
            "types": list(types or []),
            "all_subjects": subjects is None,
            "subjects": list(subjects or []),
        },
    ).all()


# --- fact sources and hook deliveries (migration 0017) ---------------------------------


def put_sources(
    *,
    session: Session,
    tenant: str,
    document: str,
    config: dict[str, Any],
    at: datetime,
    by: str,
) -> None:
    session.execute(
        sa.text(
            "INSERT INTO fact_sources (tenant_id, document, config, loaded_at, loaded_by) "
            "VALUES (:t, :document, CAST(:config AS jsonb), :at, :by) "
            "ON CONFLICT (tenant_id) DO UPDATE SET document = EXCLUDED.document, "
            "config = EXCLUDED.config, loaded_at = EXCLUDED.loaded_at, "
            "loaded_by = EXCLUDED.loaded_by"
        ),
        {"t": tenant, "document": document, "config": json.dumps(config), "at": at, "by": by},
    )


def get_sources(*, session: Session, tenant: str) -> sa.Row[Any] | None:
    return session.execute(
        sa.text(
            "SELECT document, config, loaded_at, loaded_by FROM fact_sources WHERE tenant_id = :t"
        ),
        {"t": tenant},
    ).first()


def record_pull(
    *,
    session: Session,
    tenant: str,
    source: str,
    at: datetime,
    stored: int,
    refused: dict[str, int],
    error: str | None,
    latency_ms: float,
    scheduled: bool = True,
) -> None:
    """Add one pull's counts to the source's status (one row per source, upserted); an
    unscheduled pull (a refresh) leaves ``last_pull_at`` and ``consecutive_failures``."""
    session.execute(
        sa.text(
            "INSERT INTO source_status AS s (tenant_id, source, pulls, last_pull_at, "
            "last_ok_at, samples_stored, refused, errors, last_error, last_error_at, "
            "consecutive_failures, last_latency_ms) VALUES (:t, :source, 1, "
            "CASE WHEN :scheduled THEN CAST(:at AS timestamptz) END, "
            "CASE WHEN :failed THEN NULL ELSE CAST(:at AS timestamptz) END, :stored, "
            "CAST(:refused AS jsonb), CASE WHEN :failed THEN 1 ELSE 0 END, :error, "
            "CASE WHEN :failed THEN CAST(:at AS timestamptz) END, "
            "CASE WHEN :failed AND :scheduled THEN 1 ELSE 0 END, :latency) "
            "ON CONFLICT (tenant_id, source) DO UPDATE SET pulls = s.pulls + 1, "
            "last_pull_at = CASE WHEN :scheduled THEN EXCLUDED.last_pull_at "
            "ELSE s.last_pull_at END, "
            "last_ok_at = COALESCE(EXCLUDED.last_ok_at, s.last_ok_at), "
            "samples_stored = s.samples_stored + EXCLUDED.samples_stored, "
            "refused = (SELECT COALESCE(jsonb_object_agg(k, total), '{}'::jsonb) FROM ("
            "  SELECT k, sum(v::bigint) AS total FROM ("
            "    SELECT key AS k, value AS v FROM jsonb_each_text(s.refused) UNION ALL "
            "    SELECT key, value FROM jsonb_each_text(EXCLUDED.refused)) AS parts "
            "  GROUP BY k) AS sums), "
            "errors = s.errors + EXCLUDED.errors, "
            "last_error = COALESCE(EXCLUDED.last_error, s.last_error), "
            "last_error_at = COALESCE(EXCLUDED.last_error_at, s.last_error_at), "
            "consecutive_failures = CASE WHEN NOT :scheduled THEN s.consecutive_failures "
            "WHEN :failed THEN s.consecutive_failures + 1 ELSE 0 END, "
            "last_latency_ms = EXCLUDED.last_latency_ms"
        ),
        {
            "t": tenant,
            "source": source,
            "at": at,
            "failed": error is not None,
            "scheduled": scheduled,
            "stored": stored,
            "refused": json.dumps(refused),
            "error": error,
            "latency": latency_ms,
        },
    )


def source_status(*, session: Session, tenant: str) -> Sequence[sa.Row[Any]]:
    return session.execute(
        sa.text(
            "SELECT source, pulls, last_pull_at, last_ok_at, samples_stored, refused, errors, "
            "last_error, last_error_at, consecutive_failures, last_latency_ms "
            "FROM source_status WHERE tenant_id = :t ORDER BY source"
        ),
        {"t": tenant},
    ).all()


def claim_delivery(
    *, session: Session, tenant: str, kind: str, delivery_id: str, at: datetime
) -> dict[str, Any] | None:
    """Record a delivery id; None when it is new, else the outcome of its first time."""
    row = session.execute(
        sa.text(
            "INSERT INTO hook_deliveries (tenant_id, kind, delivery_id, received_at) "
            "VALUES (:t, :kind, :id, :at) ON CONFLICT DO NOTHING RETURNING delivery_id"
        ),
        {"t": tenant, "kind": kind, "id": delivery_id, "at": at},
    ).first()
    if row is not None:
        return None
    seen = session.execute(
        sa.text(
            "SELECT outcome, received_at FROM hook_deliveries "
            "WHERE tenant_id = :t AND kind = :kind AND delivery_id = :id"
        ),
        {"t": tenant, "kind": kind, "id": delivery_id},
    ).one()
    return {**dict(seen.outcome), "received_at": seen.received_at.isoformat()}


def set_delivery_outcome(
    *, session: Session, tenant: str, kind: str, delivery_id: str, outcome: dict[str, Any]
) -> None:
    session.execute(
        sa.text(
            "UPDATE hook_deliveries SET outcome = CAST(:outcome AS jsonb) "
            "WHERE tenant_id = :t AND kind = :kind AND delivery_id = :id"
        ),
        {"t": tenant, "kind": kind, "id": delivery_id, "outcome": json.dumps(outcome)},
    )
