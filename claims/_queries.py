"""All SQL of claims. Functions take the session as a keyword; callers own the transaction."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from psycopg import Copy
from sqlalchemy.orm import Session

from predicates.errors import NotFound

__all__: list[str] = []

_ITEM_FIELDS = (
    "id, tenant_id, kind, subject, attribute, object, required, excluded, conditions, "
    "cond_key, evidence, evidence_key, derived_from, epistemic, content_type, scope_axis, "
    "scope_id, facets, purposes, acl, deny, classification, text, entities, salience, "
    "valid_from, valid_to, "
    "recorded_at, superseded_at, superseded_by, state, verified_by, verified_at, version, "
    "release_state, created_by, test_evidence"
).split(", ")
#: Every column of an item record, selected ``FROM {ITEMS}``: the row is ``i``,
#: its current state ``cur`` (``item_states``, migration 0007).
ITEM_COLUMNS = ", ".join("cur.state" if c == "state" else f"i.{c}" for c in _ITEM_FIELDS)
#: The items with their current state, for ``FROM``.
ITEMS = "items i JOIN item_states cur ON cur.tenant_id = i.tenant_id AND cur.item_id = i.id"
#: The items' state history, for ``FROM``: their ``transition`` audit rows (in
#: the order of the chain, ``seq``, at equal instants), read through
#: ``ix_audit_log_transitions``.
TRANSITIONS = (
    "(SELECT tenant_id, item_id, seq, at, actor, detail->>'from' AS from_state, "
    "code AS to_state, detail->>'reason' AS reason, detail->'cause' AS cause "
    "FROM audit_log WHERE action = 'transition')"
)


def release_as_of(at: str, alias: str = "rh") -> str:
    """``LEFT JOIN LATERAL`` fragment: ``{alias}`` is the ``release``/``retire`` audit row of
    item ``i`` current at ``at`` (a SQL expression): ``release_state``, ``at``, ``actor``,
    ``reason``. No row: the skill was still a ``draft`` then."""
    return (
        f"LEFT JOIN LATERAL (SELECT r.code AS release_state, r.at, r.actor, "
        f"r.detail->>'reason' AS reason FROM audit_log r "
        f"WHERE r.tenant_id = i.tenant_id AND r.item_id = i.id "
        f"AND r.action IN ('release', 'retire') AND r.at <= {at} "
        f"ORDER BY r.at DESC, r.seq DESC LIMIT 1) {alias} ON TRUE"
    )


def verification_as_of(at: str, alias: str = "vh") -> str:
    """``LEFT JOIN LATERAL`` fragment: ``{alias}`` is item ``i``'s latest ``verify`` audit row
    at ``at`` (``actor``, ``at``); no row: not verified then."""
    return (
        f"LEFT JOIN LATERAL (SELECT v.actor, v.at FROM audit_log v "
        f"WHERE v.tenant_id = i.tenant_id AND v.item_id = i.id "
        f"AND v.action = 'verify' AND v.at <= {at} "
        f"ORDER BY v.at DESC, v.seq DESC LIMIT 1) {alias} ON TRUE"
    )


#: The columns of ``ITEM_COLUMNS`` whose value has a history, as of the instant of the
#: ``release_as_of`` (``rh``) and ``verification_as_of`` (``vh``) joins: release state,
#: verification, and the epistemic status before the first verification (in its audit row).
_AS_OF_FIELDS = {
    "release_state": "CASE WHEN i.kind = 'skill' THEN coalesce(rh.release_state, 'draft') END",
    "verified_by": "vh.actor",
    "verified_at": "vh.at",
    "epistemic": (
        "CASE WHEN vh.actor IS NOT NULL OR i.epistemic <> 'verified' THEN i.epistemic "
        "ELSE coalesce((SELECT f.detail->>'epistemic' FROM audit_log f "
        "WHERE f.tenant_id = i.tenant_id AND f.item_id = i.id AND f.action = 'verify' "
        "ORDER BY f.at, f.seq LIMIT 1), 'observation') END"
    ),
}
#: ``ITEM_COLUMNS`` as of an instant, with the ``rh`` and ``vh`` joins in ``FROM``.
ITEM_COLUMNS_AS_OF = ", ".join(
    "cur.state"
    if c == "state"
    else (f"{_AS_OF_FIELDS[c]} AS {c}" if c in _AS_OF_FIELDS else f"i.{c}")
    for c in _ITEM_FIELDS
)

#: Columns a new item row is written with (``fts`` is computed, the rest default to NULL).
ITEM_COPY_COLUMNS = (
    "tenant_id",
    "id",
    "kind",
    "subject",
    "attribute",
    "object",
    "required",
    "excluded",
    "conditions",
    "cond_key",
    "evidence",
    "evidence_key",
    "derived_from",
    "epistemic",
    "content_type",
    "scope_axis",
    "scope_id",
    "facets",
    "purposes",
    "acl",
    "text",
    "entities",
    "salience",
    "valid_from",
    "valid_to",
    "recorded_at",
    "superseded_at",
    "superseded_by",
    "version",
    "release_state",
    "test_evidence",
    "created_by",
    # its access beside the acl (the union of its evidence's deny lists, the strictest
    # of their levels; migration 0021)
    "deny",
    "classification",
)
STATE_COPY_COLUMNS = ("tenant_id", "item_id", "state", "previous")
AUDIT_COPY_COLUMNS = (
    "tenant_id",
    "seq",
    "at",
    "actor",
    "action",
    "item_id",
    "code",
    "detail",
    "detail_digest",
    "prev_hash",
    "hash",
)
AUDIT_COPY_TYPES = (
    "varchar",
    "int8",
    "timestamptz",
    "varchar",
    "varchar",
    "int8",
    "varchar",
    "jsonb",
    "varchar",
    "varchar",
    "varchar",
)
_KEY = ("scope_axis", "scope_id", "subject", "attribute", "kind", "cond_key", "evidence_key")
_SKILL_BASE = ("scope_axis", "scope_id", "subject", "attribute", "cond_key")


_COPY_FROM = 16


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})
_ARRAY_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"'})


def _escaped(text: str) -> str:
    if "\\" in text or "\n" in text or "\r" in text or "\t" in text:
        return text.translate(_COPY_ESCAPES)
    return text


@functools.lru_cache(maxsize=256)
def _instant(value: datetime) -> str:
    return value.isoformat()


def _array(value: list[Any] | tuple[Any, ...]) -> str:
    if not value:
        return "{}"
    if all(type(v) is int for v in value):
        return "{" + ",".join(map(str, value)) + "}"
    inner = ",".join(
        '"' + (v.translate(_ARRAY_ESCAPES) if '"' in v or "\\" in v else v) + '"'
        for v in map(str, value)
    )
    return _escaped("{" + inner + "}")


_FORMATS: dict[type, Callable[[Any], str]] = {
    str: _escaped,
    int: str,
    float: repr,
    bool: lambda v: "t" if v else "f",
    type(None): lambda _: "\\N",
    list: _array,
    tuple: _array,
    datetime: _instant,
}


def _copy_field(value: Any) -> str:
    """One value in COPY text format (arrays as array literals, jsonb as its JSON text)."""
    fmt = _FORMATS.get(type(value))
    if fmt is not None:
        return fmt(value)
    if value is None:
        return "\\N"
    if isinstance(value, str):
        return _escaped(value)
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime):
        return _instant(value)
    if isinstance(value, list | tuple):
        if not value:
            return "{}"
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return "{" + ",".join(str(v) for v in value) + "}"
        inner = ",".join(
            '"' + (v.translate(_ARRAY_ESCAPES) if '"' in v or "\\" in v else v) + '"'
            for v in map(str, value)
        )
        return _escaped("{" + inner + "}")
    raise TypeError(f"no COPY text form for {type(value).__name__}")


def copy_rows(
    *, session: Session, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Insert ``rows`` in the session's transaction: ``COPY`` (text format) for many,
    one pipelined ``INSERT`` for a few. jsonb values are passed as JSON text.
    """
    if not rows:
        return
    if len(rows) < _COPY_FROM:  # a few rows: one pipelined INSERT is fewer round trips
        raw = session.connection().connection.driver_connection
        assert raw is not None
        marks = ", ".join(["%s"] * len(columns))
        with raw.cursor() as cur:
            cur.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)
        return
    with _copy(session, table, columns, "") as cp:
        cp.write("".join("\t".join(map(_copy_field, row)) + "\n" for row in rows))


def copy_binary(
    *,
    session: Session,
    table: str,
    columns: Sequence[str],
    types: Sequence[str],
    rows: Iterable[Sequence[Any]],
) -> None:
    """Insert ``rows`` with a binary ``COPY`` in the session's transaction, streamed as
    they come (``types``: the PostgreSQL type of each column)."""
    with _copy(session, table, columns, " (FORMAT BINARY)") as cp:
        cp.set_types(list(types))
        for row in rows:
            cp.write_row(row)


@contextlib.contextmanager
def _copy(session: Session, table: str, columns: Sequence[str], options: str) -> Iterator[Copy]:
    """``COPY … FROM STDIN`` into ``table``, or, where the table's row-level security
    applies to the session's user (PostgreSQL refuses ``COPY FROM`` there: the
    application role), into a temporary staging table whose rows then go into
    ``table`` with one ``INSERT … SELECT``, through the policies."""
    raw = session.connection().connection.driver_connection
    assert raw is not None
    names = ", ".join(columns)
    with raw.cursor() as cur:
        if not row_security_active(session=session, table=table):
            with cur.copy(f"COPY {table} ({names}) FROM STDIN{options}") as cp:
                yield cp
            return
        stage = f"caveat_stage_{table}_{zlib.crc32(names.encode()):08x}"
        cur.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
            f"SELECT {names} FROM {table} WITH NO DATA"
        )
        with cur.copy(f"COPY {stage} ({names}) FROM STDIN{options}") as cp:
            yield cp
        cur.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM {stage}")
        cur.execute(f"TRUNCATE {stage}")


def row_security_active(*, session: Session, table: str) -> bool:
    """Whether ``table``'s row-level security binds the session's user (the application
    role; not the owner of an embedded server, a superuser). Asked once per connection
    and table: a connection's user does not change."""
    connection = session.connection()
    key = ("caveat.row_security", table)
    if key not in connection.info:
        raw = connection.connection.driver_connection
        assert raw is not None
        row = raw.execute("SELECT row_security_active(%s)", (table,)).fetchone()
        connection.info[key] = bool(row and row[0])
    return bool(connection.info[key])


# --- who may read an item ----------------------------------------------------


def param_like(like: str, name: str) -> str:
    """A parameter ``name`` in the style of ``like``: a placeholder (``:x``, ``%(x)s``)
    or a style alone (``:``, ``%``)."""
    return f"%({name})s" if like.startswith("%") else f":{name}"


def acl_readable(row: str, *, caps: str, admin: str | None = None) -> str:
    """``readable``'s access part alone, for any row with ``acl``, ``deny`` and
    ``classification`` columns (an item's, a knowledge passage's): the operator, or no
    deny entry names the caller, its clearance reaches the level and every reader list
    holds one of its capabilities. No redaction (an item's is keyed by its id; a
    passage is withdrawn instead). Never NULL."""
    operator = "" if admin is None else f"CAST({admin} AS boolean) OR "
    deny = param_like(caps, "deny_keys")
    cleared = param_like(caps, "cleared")
    return f"""({operator}(NOT ({row}.deny && CAST({deny} AS text[]))
        AND ({row}.classification IS NULL
             OR {row}.classification = ANY(CAST({cleared} AS text[])))
        AND ({row}.acl = CAST('[]' AS jsonb) OR NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements({row}.acl) r
        WHERE NOT (r ?| CAST({caps} AS text[]))))))"""


def readable(item: str, *, caps: str, admin: str | None = None) -> str:
    """SQL that holds when the caller may read item row ``item``: the caller is the
    operator (parameter ``admin``, when given), or no entry of the item's deny list names
    it (parameter ``deny_keys``: ``Actor.deny_keys``), its clearance reaches the item's
    level (parameter ``cleared``: the level names it may read) and every evidence source
    the item was formed from is readable with the capabilities in parameter ``caps``;
    and it is not redacted. Never NULL. The one spelling of ``Actor.can_read_acl`` plus
    redaction, for every package's SQL; ``Actor.gate_params`` binds its parameters."""
    return f"""{acl_readable(item, caps=caps, admin=admin)}
  AND NOT EXISTS (SELECT 1 FROM redactions x
                  WHERE x.tenant_id = {item}.tenant_id AND x.item_id = {item}.id)"""


# --- private memory: another principal's working memory is never known -------
#
# One rule for every package's SQL (model §4 "Private memory"; docs/agents.md): recall's
# candidates and state gate, the lifecycle's reads (lineage, the re-opened queue,
# citations, what a close or an event names), the audit log. Spelled for both parameter
# styles (``:x``, ``%(x)s``); ``claims._access.private_visible`` is its Python twin
# (tests/claims/test_private_rule.py holds the two to each other).


def owns_session(item: str, *, at: str | None = None, style: str = ":") -> str:
    """The caller (parameter ``principal``) owns the session of item ``item`` (by ``at``;
    None: now, a session's owner never changes)."""
    by = "" if at is None else f" AND ms.claimed_at <= CAST({at} AS timestamptz)"
    return f"""EXISTS (SELECT 1 FROM memory_sessions ms WHERE ms.tenant_id = {item}.tenant_id
        AND ms.session_id = {item}.scope_id
        AND ms.principal = CAST({param_like(style, "principal")} AS text){by})"""


def private_visible(item: str, *, at: str | None = None, style: str = ":") -> str:
    """Item ``item`` is not another principal's working memory: a ``session`` item is
    known to the principal that owns the session (parameter ``principal``) and the
    operator (parameter ``admin``) only; to everyone else it is hidden like the read
    gate hides (never mentioned, never counted). An ``agent`` item is not hidden: it
    reaches others through the lifecycle like a case item. ``Actor.gate_params`` binds
    both parameters. Never NULL."""
    admin = param_like(style, "admin")
    return (
        f"({item}.scope_axis <> 'session' OR CAST({admin} AS boolean) "
        f"OR {owns_session(item, at=at, style=style)})"
    )


# --- audit -----------------------------------------------------------------


@dataclass(frozen=True)
class AuditRun:
    """A run of audit rows continuing a tenant's chain, as ``caveat_append_audit``
    (migration 0014) takes it: positions ``seq``, ``seq + 1``, ...; the first row links
    to ``prev``, each next one to the hash before it; all at ``at``. ``kinds`` holds the
    distinct ``(actor, action, code, detail, detail_digest)`` once (migration 0023);
    ``kind[i]`` is row i's, from 1."""

    seq: int
    prev: str
    at: datetime
    kinds: Sequence[tuple[str, str, str | None, Any, str]]
    kind: Sequence[int]
    item_id: Sequence[int | None]
    hash: Sequence[str]


# Per-row arrays go as array literals (psycopg adapts a long list element by
# element); the few distinct details as binary jsonb, parsed once each.
_APPEND_AUDIT = (
    "SELECT caveat_append_audit(CAST(%s AS bigint), CAST(%s AS text), CAST(%s AS timestamptz), "
    "CAST(%s AS text[]), CAST(%s AS text[]), CAST(%s AS text[]), CAST(%b AS jsonb[]), "
    "CAST(%s AS text[]), CAST(%s AS int[]), CAST(%s AS bigint[]), CAST(%s AS text[]))"
)
_HEX_LIST = re.compile(r"[0-9a-f,]*")


def _bigint_array(values: Sequence[int | None]) -> str:
    return "{" + ",".join("NULL" if v is None else str(int(v)) for v in values) + "}"


def _text_array(values: Sequence[str]) -> str | list[str]:
    joined = ",".join(values)
    if _HEX_LIST.fullmatch(joined) and all(values):  # digests: nothing to quote
        return "{" + joined + "}"
    return list(values)  # anything else: adapted by the driver, quoted as it must be


def append_audit_runs(*, session: Session, runs: Iterable[AuditRun]) -> None:
    """Append each run to the audit log of the transaction's tenant (``caveat.tenant``)
    through ``caveat_append_audit``, the application role's bulk append under row-level
    security (it may not ``COPY`` there). The calls are pipelined: the server stores a
    run while the next one is made (``runs`` may be a generator). A refusal raises the
    driver's error when the pipeline ends; the transaction is then aborted."""
    raw = session.connection().connection.driver_connection
    assert raw is not None
    with raw.pipeline(), raw.cursor() as cur:
        for run in runs:
            cur.execute(
                _APPEND_AUDIT,
                (
                    run.seq,
                    run.prev,
                    run.at,
                    [k[0] for k in run.kinds],
                    [k[1] for k in run.kinds],
                    [k[2] for k in run.kinds],
                    [k[3] for k in run.kinds],
                    _text_array([k[4] for k in run.kinds]),
                    "{" + ",".join(map(str, run.kind)) + "}",
                    _bigint_array(run.item_id),
                    _text_array(run.hash),
                ),
            )


def lock_audit_head(*, session: Session, tenant: str) -> tuple[int, str | None]:
    row = session.execute(
        sa.text("SELECT audit_seq, audit_hash FROM tenants WHERE id = :t FOR UPDATE"),
        {"t": tenant},
    ).first()
    if row is None:
        raise NotFound(f"no tenant {tenant!r}", tenant=tenant)
    return int(row[0]), row[1]


def audit_head(*, session: Session, tenant: str) -> tuple[int, str | None]:
    row = session.execute(
        sa.text("SELECT audit_seq, audit_hash FROM tenants WHERE id = :t"), {"t": tenant}
    ).first()
    return (0, None) if row is None else (int(row[0]), row[1])


def set_audit_head(*, session: Session, tenant: str, seq: int, digest: str) -> None:
    session.execute(
        sa.text("UPDATE tenants SET audit_seq = :s, audit_hash = :h WHERE id = :t"),
        {"s": seq, "h": digest, "t": tenant},
    )


# An audit row the reader may see: any row for an operator (``:everything``); for the
# others, no row about an item they may not read (evidence they do not hold, or redacted)
# and no ``contested`` row naming one; an agent (``:own``) sees only its own rows.
def _hidden(item: str) -> str:
    # another principal's working memory is hidden too (docs/agents.md, "Private memory"),
    # and another agent's core blocks (docs/blocks.md: an agent's blocks are read by that
    # agent and the admin; the operator reads ``:everything``)
    return f"""EXISTS (SELECT 1 FROM items i WHERE i.tenant_id = audit_log.tenant_id
        AND i.id = {item} AND (NOT ({readable("i", caps=":capabilities")})
          OR (i.kind = 'block' AND i.scope_axis = 'agent'
              AND i.scope_id IS DISTINCT FROM CAST(:reader AS text))
          OR (i.scope_axis = 'session' AND NOT {owns_session("i")})))"""


_AUDIT_SEEN = f"""
  AND (CAST(:own AS text) IS NULL OR actor = :own)
  AND (CAST(:everything AS boolean) OR (
        (item_id IS NULL OR NOT {_hidden("audit_log.item_id")})
    AND (action <> 'contested' OR NOT EXISTS (
          SELECT 1 FROM jsonb_each(CASE jsonb_typeof(detail->'values') WHEN 'object'
                                   THEN detail->'values' ELSE '{{}}'::jsonb END) v,
                        jsonb_array_elements_text(CASE jsonb_typeof(v.value) WHEN 'array'
                                                  THEN v.value ELSE '[]'::jsonb END) held(id)
          WHERE held.id ~ '^[0-9]{{1,18}}$' AND {_hidden("CAST(held.id AS bigint)")}))))
"""


@dataclass(frozen=True)
class AuditReader:
    """Who lists the audit log (``_AUDIT_SEEN``): ``everything`` for the operator;
    otherwise the capabilities it reads evidence with, and, for an agent, its own id."""

    everything: bool = True
    capabilities: tuple[str, ...] = ()
    own: str | None = None
    #: ``Actor.deny_keys`` and ``Actor.cleared`` of the reader (``readable``).
    deny_keys: tuple[str, ...] = ()
    cleared: tuple[str, ...] = ()
    #: the reader's principal id (the owner of its working memory)
    reader: str | None = None

    def params(self) -> dict[str, Any]:
        return {
            "everything": self.everything,
            "reader": self.reader,
            "principal": self.reader,  # owns_session's name for the reader
            "capabilities": list(self.capabilities),
            "own": self.own,
            "deny_keys": list(self.deny_keys),
            "cleared": list(self.cleared),
        }


def audit_entries(
    *,
    session: Session,
    tenant: str,
    item_id: int | None = None,
    actor: str | None = None,
    code: str | None = None,
    action: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = None,
    reader: AuditReader = AuditReader(),
) -> Sequence[sa.Row[Any]]:
    """Audit rows in seq order; with ``limit`` the last ``limit`` that match."""
    return session.execute(
        sa.text(
            "SELECT * FROM (SELECT seq, at, actor, action, item_id, code, detail, detail_digest, "
            "prev_hash, hash FROM audit_log WHERE tenant_id = :t "
            "AND (CAST(:item AS bigint) IS NULL OR item_id = :item) "
            "AND (CAST(:actor AS text) IS NULL OR actor = :actor) "
            "AND (CAST(:code AS text) IS NULL OR code = :code) "
            "AND (CAST(:action AS text) IS NULL OR action = :action) "
            "AND (CAST(:since AS timestamptz) IS NULL OR at >= :since) "
            "AND (CAST(:until AS timestamptz) IS NULL OR at < :until) "
            f"{_AUDIT_SEEN} ORDER BY seq DESC LIMIT :limit) last ORDER BY seq"
        ),
        {
            "t": tenant,
            "item": item_id,
            "actor": actor,
            "code": code,
            "action": action,
            "since": since,
            "until": until,
            "limit": limit,
            **reader.params(),
        },
    ).all()


def audit_page(
    *,
    session: Session,
    tenant: str,
    after: int,
    limit: int,
    item_id: int | None = None,
    actor: str | None = None,
    code: str | None = None,
    action: str | None = None,
    reader: AuditReader = AuditReader(),
) -> Sequence[sa.Row[Any]]:
    """A keyset page: the first ``limit`` matching rows past chain position ``after``,
    in seq order (reads forward from ``after`` on the primary key, never the whole log)."""
    return session.execute(
        sa.text(
            "SELECT seq, at, actor, action, item_id, code, detail, detail_digest, prev_hash, "
            "hash FROM audit_log WHERE tenant_id = :t AND seq > :after "
            "AND (CAST(:item AS bigint) IS NULL OR item_id = :item) "
            "AND (CAST(:actor AS text) IS NULL OR actor = :actor) "
            "AND (CAST(:code AS text) IS NULL OR code = :code) "
            "AND (CAST(:action AS text) IS NULL OR action = :action) "
            f"{_AUDIT_SEEN} ORDER BY seq LIMIT :limit"
        ),
        {
            "t": tenant,
            "after": after,
            "limit": limit,
            "item": item_id,
            "actor": actor,
            "code": code,
            "action": action,
            **reader.params(),
        },
    ).all()


# --- principals and evidence -----------------------------------------------


def upsert_principal(
    *,
    session: Session,
    tenant: str,
    principal: str,
    role: str,
    capabilities: Sequence[str],
    clearance: str,
    team: str | None = None,
) -> None:
    """Insert or update a principal; ``team`` None keeps an existing one's team."""
    session.execute(
        sa.text(
            "INSERT INTO principals (tenant_id, id, role, capabilities, clearance, team) "
            "VALUES (:t, :p, :r, :c, :cl, :team) "
            "ON CONFLICT (tenant_id, id) DO UPDATE SET role = EXCLUDED.role, "
            "capabilities = EXCLUDED.capabilities, clearance = EXCLUDED.clearance, "
            "team = coalesce(EXCLUDED.team, principals.team)"
        ),
        {
            "t": tenant,
            "p": principal,
            "r": role,
            "c": list(capabilities),
            "cl": clearance,
            "team": team,
        },
    )


def set_team(*, session: Session, tenant: str, principal: str, team: str) -> None:
    """Set an existing principal's team."""
    session.execute(
        sa.text("UPDATE principals SET team = :team WHERE tenant_id = :t AND id = :p"),
        {"t": tenant, "p": principal, "team": team},
    )


#: The tenant's classification level names as its stored policy has them (NULL: the
#: policy's default), beside a principal's or a token's row.
_LEVELS = "(SELECT policy->'classification_levels' FROM tenants WHERE id = :t) AS levels"


def principal(*, session: Session, tenant: str, principal: str) -> sa.Row[Any] | None:
    """A principal with its clearance and the tenant's classification ``levels``."""
    return session.execute(
        sa.text(
            f"SELECT id, role, capabilities, clearance, team, {_LEVELS} FROM principals "
            "WHERE tenant_id = :t AND id = :p"
        ),
        {"t": tenant, "p": principal},
    ).first()


def classification_levels(*, session: Session, tenant: str) -> Any:
    """The tenant's stored classification level names (None: the policy's default)."""
    return session.execute(sa.text(f"SELECT {_LEVELS}"), {"t": tenant}).scalar()


def insert_evidence(
    *,
    session: Session,
    tenant: str,
    evidence_id: str,
    title: str | None,
    uri: str | None,
    readers: Sequence[str],
    at: datetime,
    actor: str,
    test_outcome: str | None = None,
    deny: Sequence[str] = (),
    classification: str | None = None,
) -> bool:
    """Insert; False when the id already exists."""
    row = session.execute(
        sa.text(
            "INSERT INTO evidence (tenant_id, id, title, uri, readers, recorded_at, recorded_by, "
            "test_outcome, deny, classification) "
            "VALUES (:t, :id, :title, :uri, :r, :at, :by, :outcome, :deny, :cl) "
            "ON CONFLICT DO NOTHING RETURNING id"
        ),
        {
            "t": tenant,
            "id": evidence_id,
            "title": title,
            "uri": uri,
            "r": list(readers),
            "at": at,
            "by": actor,
            "outcome": test_outcome,
            "deny": list(deny),
            "cl": classification,
        },
    ).first()
    return row is not None


def evidence_row(*, session: Session, tenant: str, evidence_id: str) -> sa.Row[Any] | None:
    return session.execute(
        sa.text(
            "SELECT id, readers, deny, classification, test_outcome FROM evidence "
            "WHERE tenant_id = :t AND id = :id"
        ),
        {"t": tenant, "id": evidence_id},
    ).first()


def evidence_access(*, session: Session, tenant: str, ids: Sequence[str]) -> dict[str, Any]:
    """``(id, readers, deny, classification)`` of each of ``ids`` registered, by id."""
    rows = session.execute(
        sa.text(
            "SELECT id, readers, deny, classification FROM evidence "
            "WHERE tenant_id = :t AND id = ANY(:ids)"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()
    return {r.id: r for r in rows}


# --- items -----------------------------------------------------------------


def item(*, session: Session, tenant: str, item_id: int, lock: bool = False) -> sa.Row[Any] | None:
    suffix = " FOR UPDATE" if lock else ""
    return session.execute(
        sa.text(
            f"SELECT {ITEM_COLUMNS} FROM {ITEMS} WHERE i.tenant_id = :t AND i.id = :id{suffix}"
        ),
        {"t": tenant, "id": item_id},
    ).first()


def items_by_id(*, session: Session, tenant: str, ids: Sequence[int]) -> Sequence[sa.Row[Any]]:
    return session.execute(
        sa.text(f"SELECT {ITEM_COLUMNS} FROM {ITEMS} WHERE i.tenant_id = :t AND i.id = ANY(:ids)"),
        {"t": tenant, "ids": list(ids)},
    ).all()


def move_state(*, session: Session, tenant: str, item_id: int, state: str) -> None:
    """Set the item's state (and ``previous``, the state it leaves)."""
    session.execute(
        sa.text(
            "UPDATE item_states SET previous = state, state = :state "
            "WHERE tenant_id = :t AND item_id = :id"
        ),
        {"t": tenant, "id": item_id, "state": state},
    )


def set_item_columns(
    *, session: Session, tenant: str, item_id: int, values: dict[str, Any]
) -> None:
    """Set columns of the item row (its verification: who, when, ``epistemic``)."""
    sets = ", ".join(f"{k} = :{k}" for k in values)
    session.execute(
        sa.text(f"UPDATE items SET {sets} WHERE tenant_id = :t AND id = :id"),
        {"t": tenant, "id": item_id, **values},
    )


def item_acls(*, session: Session, tenant: str, ids: Sequence[int]) -> dict[int, Any]:
    """``(id, acl, deny, classification)`` of each of ``ids`` that exists (whoever may
    read it), by id."""
    if not ids:
        return {}
    rows = session.execute(
        sa.text(
            "SELECT id, acl, deny, classification FROM items "
            "WHERE tenant_id = :t AND id = ANY(:ids)"
        ),
        {"t": tenant, "ids": sorted(set(ids))},
    ).all()
    return {int(r.id): r for r in rows}


def _unnest(columns: Sequence[str], keys: Sequence[Sequence[str]]) -> tuple[str, dict[str, Any]]:
    casts = ", ".join(f"CAST(:k{n} AS text[])" for n in range(len(columns)))
    params = {f"k{n}": [k[n] for k in keys] for n in range(len(columns))}
    return f"unnest({casts}) AS k({', '.join(columns)})", params


def key_digest(tenant: str, key: Sequence[str]) -> str:
    """The ``items.key_digest`` of a tenant's supersession key (``_KEY`` order):
    md5 over the parts joined by U+001F, as the generated column computes it."""
    return hashlib.md5("\x1f".join([tenant, *key]).encode(), usedforsecurity=False).hexdigest()


def current_by_keys(
    *, session: Session, tenant: str, keys: Sequence[Sequence[str]]
) -> Sequence[sa.Row[Any]]:
    """The current rows for ``keys`` (tuples in ``_KEY`` order), locked, in id order.

    One probe of ``ix_items_current_digest`` per key: the digest is the only
    predicate the probe has, so the plan cannot drift to a scan of the
    tenant's rows when statistics are missing (a fresh table in a bulk
    load). Rows are then matched on the tenant and the full key.
    """
    if not keys:
        return []
    wanted = {tuple(k) for k in keys}
    rows = session.execute(
        sa.text(
            "SELECT c.* FROM unnest(CAST(:d AS text[])) AS k(d) CROSS JOIN LATERAL ("
            f"SELECT {ITEM_COLUMNS} FROM {ITEMS} WHERE i.key_digest = k.d "
            "AND i.superseded_at IS NULL FOR UPDATE) c ORDER BY c.id"
        ),
        {"d": sorted({key_digest(tenant, k) for k in wanted})},
    ).all()
    return [
        r for r in rows if r.tenant_id == tenant and tuple(getattr(r, c) for c in _KEY) in wanted
    ]


def skill_rows(
    *, session: Session, tenant: str, bases: Sequence[Sequence[str]]
) -> Sequence[sa.Row[Any]]:
    """Every version of the skills named by ``bases`` (tuples in ``_SKILL_BASE`` order)."""
    if not bases:
        return []
    source, params = _unnest(_SKILL_BASE, bases)
    on = " AND ".join(f"i.{c} = k.{c}" for c in _SKILL_BASE)
    return session.execute(
        sa.text(
            f"SELECT i.id, i.scope_axis, i.scope_id, i.subject, i.attribute, i.cond_key, "
            f"i.version, i.superseded_at, i.object, i.acl, i.deny, i.classification, cur.state, "
            f"i.release_state "
            f"FROM {ITEMS} JOIN {source} ON {on} WHERE i.tenant_id = :t AND i.kind = 'skill' "
            "ORDER BY i.id"
        ),
        {"t": tenant, **params},
    ).all()


def allocate_item_ids(*, session: Session, n: int) -> list[int]:
    """``n`` fresh item ids from the identity sequence."""
    rows = session.execute(
        sa.text(
            "SELECT nextval(pg_get_serial_sequence('items', 'id')) FROM generate_series(1, :n)"
        ),
        {"n": n},
    ).all()
    return [int(r[0]) for r in rows]


def supersede_rows(
    *, session: Session, tenant: str, at: datetime, pairs: Sequence[tuple[int, int, str]]
) -> dict[int, bool]:
    """Take rows out of the current set, linked to their successors.

    ``pairs`` are ``(old id, successor id, state to leave it in)``. Returns,
    per row taken out, whether its state changed (a revoked row stays revoked).
    """
    if not pairs:
        return {}
    rows = session.execute(
        sa.text(
            "WITH u AS (SELECT * FROM unnest(CAST(:ids AS bigint[]), CAST(:succ AS bigint[]), "
            "  CAST(:states AS text[])) AS u(id, succ, state)), "
            "moved AS (UPDATE items SET superseded_at = :at, superseded_by = u.succ FROM u "
            "  WHERE items.tenant_id = :t AND items.id = u.id AND items.superseded_at IS NULL "
            "  RETURNING items.id), "
            "st AS (UPDATE item_states s SET previous = s.state, state = u.state "
            "  FROM u JOIN moved ON moved.id = u.id "
            "  WHERE s.tenant_id = :t AND s.item_id = u.id AND s.state <> u.state "
            "  RETURNING s.item_id) "
            "SELECT moved.id, st.item_id IS NOT NULL FROM moved "
            "LEFT JOIN st ON st.item_id = moved.id"
        ),
        {
            "t": tenant,
            "at": at,
            "ids": [p[0] for p in pairs],
            "succ": [p[1] for p in pairs],
            "states": [p[2] for p in pairs],
        },
    ).all()
    return {int(r[0]): bool(r[1]) for r in rows}


def withdrawn_ancestors_by_root(
    *, session: Session, tenant: str, ids: Sequence[int]
) -> dict[int, list[tuple[int, str]]]:
    """For each id in ``ids``: it and its transitive ancestors that are withdrawn
    (``revoked`` or ``refuted``), each ``(id, state)``, by id."""
    if not ids:
        return {}
    rows = session.execute(
        sa.text(
            "WITH RECURSIVE anc(root, id) AS ("
            "  SELECT r, r FROM unnest(CAST(:ids AS bigint[])) AS r "
            "  UNION SELECT anc.root, unnest(i.derived_from) FROM items i "
            "  JOIN anc ON i.id = anc.id WHERE i.tenant_id = :t"
            ") SELECT anc.root, s.item_id, s.state FROM item_states s "
            "JOIN anc ON s.item_id = anc.id "
            "WHERE s.tenant_id = :t AND s.state IN ('revoked', 'refuted') ORDER BY 1, 2"
        ),
        {"t": tenant, "ids": sorted(set(ids))},
    ).all()
    out: dict[int, list[tuple[int, str]]] = {}
    for root, rid, state in rows:
        out.setdefault(int(root), []).append((int(rid), str(state)))
    return out


def items_as_of(
    *,
    session: Session,
    tenant: str,
    at: datetime,
    subject: str | None = None,
    attribute: str | None = None,
    kind: str | None = None,
    gate: dict[str, Any] | None = None,
) -> Sequence[sa.Row[Any]]:
    """Rows current at ``at`` (recorded by then, not superseded by then), each with its
    state then (``state_then``, from the transition history), its release state and
    verification then, in id order; with ``gate`` (the reader's ``Actor.gate_params``),
    never another principal's working memory (``private_visible``)."""
    return session.execute(
        sa.text(
            f"SELECT {ITEM_COLUMNS_AS_OF}, st.state AS state_then FROM {ITEMS} "
            f"LEFT JOIN LATERAL (SELECT t.to_state AS state FROM {TRANSITIONS} t "
            "  WHERE t.tenant_id = i.tenant_id AND t.item_id = i.id AND t.at <= :at "
            "  ORDER BY t.at DESC, t.seq DESC LIMIT 1"
            f") st ON TRUE {release_as_of(':at')} {verification_as_of(':at')} "
            "WHERE i.tenant_id = :t AND i.recorded_at <= :at "
            "AND (i.superseded_at IS NULL OR i.superseded_at > :at) "
            "AND (CAST(:subject AS text) IS NULL OR i.subject = :subject) "
            "AND (CAST(:attribute AS text) IS NULL OR i.attribute = :attribute) "
            "AND (CAST(:kind AS text) IS NULL OR i.kind = :kind) "
            f"AND (CAST(:everyone AS boolean) OR {private_visible('i')}) ORDER BY i.id"
        ),
        {
            "admin": False,
            "principal": None,
            **(gate or {}),
            "everyone": gate is None,
            "t": tenant,
            "at": at,
            "subject": subject,
            "attribute": attribute,
            "kind": kind,
        },
    ).all()


def skill_family(*, session: Session, tenant: str, item_id: int) -> Sequence[sa.Row[Any]]:
    """Every current version of the skill ``item_id`` is a version of, locked, by id."""
    return session.execute(
        sa.text(
            "SELECT o.id, o.version, o.release_state FROM items s JOIN items o "
            "ON o.tenant_id = s.tenant_id AND o.kind = 'skill' AND o.scope_axis = s.scope_axis "
            "AND o.scope_id = s.scope_id AND o.subject = s.subject "
            "AND o.attribute = s.attribute AND o.cond_key = s.cond_key "
            "WHERE s.tenant_id = :t AND s.id = :id AND o.superseded_at IS NULL "
            "ORDER BY o.id FOR UPDATE OF o"
        ),
        {"t": tenant, "id": item_id},
    ).all()


def set_release(
    *, session: Session, tenant: str, item_id: int, release_state: str, test_evidence: str | None
) -> None:
    session.execute(
        sa.text(
            "UPDATE items SET release_state = :r, "
            "test_evidence = coalesce(CAST(:test AS text), test_evidence) "
            "WHERE tenant_id = :t AND id = :id"
        ),
        {"t": tenant, "id": item_id, "r": release_state, "test": test_evidence},
    )


def insert_token(
    *,
    session: Session,
    tenant: str,
    token_id: str,
    principal: str,
    capabilities: Sequence[str],
    secret_sha256: str,
    at: datetime,
    actor: str,
    clearance: str | None = None,
) -> None:
    session.execute(
        sa.text(
            "INSERT INTO api_tokens (tenant_id, id, principal, capabilities, secret_sha256, "
            "created_at, created_by, clearance) VALUES (:t, :i, :p, :c, :h, :at, :by, :cl)"
        ),
        {
            "t": tenant,
            "i": token_id,
            "p": principal,
            "c": list(capabilities),
            "h": secret_sha256,
            "at": at,
            "by": actor,
            "cl": clearance,
        },
    )


def tokens(*, session: Session, tenant: str) -> list[sa.Row[Any]]:
    """Every token of the tenant with its principal's role, newest first."""
    return list(
        session.execute(
            sa.text(
                "SELECT k.id, k.principal, p.role, k.capabilities, k.created_at, k.created_by, "
                "k.revoked_at, coalesce(k.clearance, p.clearance) AS clearance "
                "FROM api_tokens k JOIN principals p "
                "ON p.tenant_id = k.tenant_id AND p.id = k.principal "
                "WHERE k.tenant_id = :t ORDER BY k.created_at DESC, k.id"
            ),
            {"t": tenant},
        ).all()
    )


def token(*, session: Session, tenant: str, token_id: str) -> sa.Row[Any] | None:
    """One token with its principal's stored role and capabilities."""
    return session.execute(
        sa.text(
            "SELECT k.principal, k.capabilities, k.secret_sha256, k.revoked_at, p.role, "
            "p.capabilities AS owner_capabilities, k.clearance, p.team, "
            f"p.clearance AS owner_clearance, {_LEVELS} FROM api_tokens k JOIN principals p "
            "ON p.tenant_id = k.tenant_id AND p.id = k.principal "
            "WHERE k.tenant_id = :t AND k.id = :i"
        ),
        {"t": tenant, "i": token_id},
    ).first()


def credentials_version(*, connection: sa.Connection, tenant: str) -> int:
    """The tenant's credentials version (migration 0029; -1 for an unknown tenant): one
    statement (``caveat_credentials_version``), so it may run in autocommit."""
    return int(
        connection.exec_driver_sql("SELECT caveat_credentials_version(%s)", (tenant,)).scalar_one()
    )


def revoke_token(*, session: Session, tenant: str, token_id: str, at: datetime, actor: str) -> bool:
    """Mark a live token revoked; False when there is none (absent or already revoked)."""
    row = session.execute(
        sa.text(
            "UPDATE api_tokens SET revoked_at = :at, revoked_by = :by "
            "WHERE tenant_id = :t AND id = :i AND revoked_at IS NULL RETURNING id"
        ),
        {"t": tenant, "i": token_id, "at": at, "by": actor},
    ).first()
    return row is not None


# --- the tenant's registry (migration 0022) ------------------------------------------


def registry_row(*, session: Session, tenant: str) -> sa.Row[Any] | None:
    """The tenant's loaded registry: document, declared, loaded_at, loaded_by."""
    return session.execute(
        sa.text(
            "SELECT document, declared, loaded_at, loaded_by FROM tenant_registry "
            "WHERE tenant_id = :t"
        ),
        {"t": tenant},
    ).first()


def upsert_registry(
    *, session: Session, tenant: str, document: str, declared: Any, at: datetime, actor: str
) -> None:
    """Make ``declared`` (and the text it was read from) the tenant's registry."""
    session.execute(
        sa.text(
            "INSERT INTO tenant_registry (tenant_id, document, declared, loaded_at, loaded_by) "
            "VALUES (:t, :d, CAST(:j AS jsonb), :at, :by) "
            "ON CONFLICT (tenant_id) DO UPDATE SET document = EXCLUDED.document, "
            "declared = EXCLUDED.declared, loaded_at = EXCLUDED.loaded_at, "
            "loaded_by = EXCLUDED.loaded_by"
        ),
        {"t": tenant, "d": document, "j": json.dumps(declared), "at": at, "by": actor},
    )


def content_types_in_use(*, session: Session, tenant: str, names: Sequence[str]) -> dict[str, int]:
    """``{content type: current items of it}`` among ``names``, those used only."""
    if not names:
        return {}
    rows = session.execute(
        sa.text(
            "SELECT content_type, count(*) FROM items WHERE tenant_id = :t "
            "AND superseded_at IS NULL AND content_type = ANY(:n) GROUP BY content_type"
        ),
        {"t": tenant, "n": list(names)},
    ).all()
    return {str(r[0]): int(r[1]) for r in rows}


def erase_audit_details(*, session: Session, tenant: str, erasure: int, seqs: Sequence[int]) -> int:
    """Set the detail of the tenant's audit rows ``seqs`` to NULL, under erasure record
    ``erasure`` (``caveat_erase_audit``, migration 0023: it erases in the transaction's
    tenant, which a session that names none, the owner's, is given here); how many."""
    session.execute(
        sa.text(
            "SELECT set_config('caveat.tenant', :t, true) "
            "WHERE coalesce(current_setting('caveat.tenant', true), '') = ''"
        ),
        {"t": tenant},
    )
    return int(
        session.execute(
            sa.text("SELECT caveat_erase_audit(CAST(:e AS bigint), CAST(:s AS bigint[]))"),
            {"e": erasure, "s": list(seqs)},
        ).scalar_one()
    )


# --- core blocks (claims._blocks) ---------------------------------------------------

#: A core block row in force: current, not withdrawn, not redacted.
_BLOCK_LIVE = (
    "i.tenant_id = :t AND i.kind = 'block' AND i.superseded_at IS NULL "
    "AND cur.state NOT IN ('revoked', 'refuted', 'archived') "
    "AND NOT EXISTS (SELECT 1 FROM redactions x "
    "WHERE x.tenant_id = i.tenant_id AND x.item_id = i.id)"
)


def current_blocks(
    *, session: Session, tenant: str, scopes: Sequence[tuple[str, str]] | None
) -> Sequence[sa.Row[Any]]:
    """The core blocks in force on ``scopes`` (``(axis, id)`` pairs; None: every anchor),
    ordered by anchor and label (the caller orders the axes)."""
    axes = [a for a, _ in scopes or ()]
    ids = [i for _, i in scopes or ()]
    return session.execute(
        sa.text(
            f"SELECT {ITEM_COLUMNS} FROM {ITEMS} WHERE {_BLOCK_LIVE} "
            "AND (CAST(:every AS boolean) OR (i.scope_axis, i.scope_id) IN "
            "(SELECT * FROM unnest(CAST(:axes AS text[]), CAST(:ids AS text[])))) "
            "ORDER BY i.scope_axis, i.scope_id, i.attribute"
        ),
        {"t": tenant, "every": scopes is None, "axes": axes, "ids": ids},
    ).all()


def block_rows(
    *, session: Session, tenant: str, axis: str, anchor_id: str, attribute: str
) -> Sequence[sa.Row[Any]]:
    """Every row a core block's key has held, oldest first (its history), redacted ones
    left out."""
    return session.execute(
        sa.text(
            f"SELECT {ITEM_COLUMNS} FROM {ITEMS} WHERE i.tenant_id = :t AND i.kind = 'block' "
            "AND i.scope_axis = :axis AND i.scope_id = :id AND i.attribute = :attr "
            "AND NOT EXISTS (SELECT 1 FROM redactions x "
            "WHERE x.tenant_id = i.tenant_id AND x.item_id = i.id) "
            "ORDER BY i.recorded_at, i.id"
        ),
        {"t": tenant, "axis": axis, "id": anchor_id, "attr": attribute},
    ).all()


# --- working-memory sessions (migration 0024) ---


def session_owners(*, session: Session, tenant: str, ids: Sequence[str]) -> dict[str, str]:
    """The owner (principal) of each of the sessions ``ids`` that has one."""
    if not ids:
        return {}
    rows = session.execute(
        sa.text(
            "SELECT session_id, principal FROM memory_sessions "
            "WHERE tenant_id = :t AND session_id = ANY(:ids)"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()
    return {str(r[0]): str(r[1]) for r in rows}


def claim_sessions(
    *, session: Session, tenant: str, ids: Sequence[str], principal: str, at: datetime
) -> dict[str, str]:
    """Record ``principal`` as the owner of each session of ``ids`` that has none yet (a
    concurrent first write waits on the key); the owner of each, after."""
    if ids:
        session.execute(
            sa.text(
                "INSERT INTO memory_sessions (tenant_id, session_id, principal, claimed_at) "
                "SELECT :t, s, :p, :at FROM unnest(CAST(:ids AS text[])) s "
                "ON CONFLICT (tenant_id, session_id) DO NOTHING"
            ),
            {"t": tenant, "ids": sorted(set(ids)), "p": principal, "at": at},
        )
    return session_owners(session=session, tenant=tenant, ids=ids)


# --- documents (knowledge beside memory, model §6; claims._documents) ----------------

_DOC_FIELDS = (
    "id, version, title, uri, readers, deny, classification, purposes, digest, "
    "imported_at, imported_by, superseded_at, revoked_at, revoked_by, redacted_at"
)
_PASSAGE_FIELDS = (
    "id, document_id, document_version, ordinal, heading_path, fragment, text, acl, deny, "
    "classification, purposes, recorded_at, withdrawn_at, withdrawn_reason"
)


def lock_documents(*, session: Session, tenant: str) -> None:
    """Serialise document imports, revocations and redactions of ``tenant`` (a
    transaction-scoped advisory lock): two imports of one document never race for its
    next version."""
    session.execute(
        sa.text("SELECT pg_advisory_xact_lock(hashtext('caveat.documents'), hashtext(:t))"),
        {"t": tenant},
    )


def current_documents(
    *, session: Session, tenant: str, ids: Sequence[str] | None = None
) -> list[sa.Row[Any]]:
    """The current (not superseded) version of each document (of ``ids``; None: all),
    redacted ones included, by id."""
    where = "" if ids is None else " AND id = ANY(:ids)"
    return list(
        session.execute(
            sa.text(
                f"SELECT {_DOC_FIELDS} FROM documents "
                f"WHERE tenant_id = :t AND superseded_at IS NULL{where} ORDER BY id"
            ),
            {"t": tenant, "ids": list(ids or ())},
        ).all()
    )


def document_versions(*, session: Session, tenant: str, document_id: str) -> list[sa.Row[Any]]:
    """Every version of a document, oldest first."""
    return list(
        session.execute(
            sa.text(
                f"SELECT {_DOC_FIELDS} FROM documents WHERE tenant_id = :t AND id = :id "
                "ORDER BY version"
            ),
            {"t": tenant, "id": document_id},
        ).all()
    )


def supersede_document(
    *, session: Session, tenant: str, document_id: str, version: int, at: datetime
) -> None:
    """End a document's current version and withdraw its passages as ``superseded``."""
    session.execute(
        sa.text(
            "UPDATE documents SET superseded_at = :at "
            "WHERE tenant_id = :t AND id = :id AND version = :v AND superseded_at IS NULL"
        ),
        {"t": tenant, "id": document_id, "v": version, "at": at},
    )
    withdraw_passages(
        session=session,
        tenant=tenant,
        document_id=document_id,
        version=version,
        reason="superseded",
        at=at,
    )


def insert_document(
    *,
    session: Session,
    tenant: str,
    document_id: str,
    version: int,
    title: str | None,
    uri: str | None,
    readers: Sequence[str],
    deny: Sequence[str],
    classification: str | None,
    purposes: Sequence[str],
    digest: str,
    at: datetime,
    actor: str,
) -> None:
    session.execute(
        sa.text(
            "INSERT INTO documents (tenant_id, id, version, title, uri, readers, deny, "
            "classification, purposes, digest, imported_at, imported_by) "
            "VALUES (:t, :id, :v, :title, :uri, :r, :deny, :cl, :p, :digest, :at, :by)"
        ),
        {
            "t": tenant,
            "id": document_id,
            "v": version,
            "title": title,
            "uri": uri,
            "r": list(readers),
            "deny": list(deny),
            "cl": classification,
            "p": list(purposes),
            "digest": digest,
            "at": at,
            "by": actor,
        },
    )


def insert_passages(
    *,
    session: Session,
    tenant: str,
    document_id: str,
    version: int,
    rows: Sequence[tuple[int, Sequence[str], str, str]],
    acl: Sequence[Sequence[str]],
    deny: Sequence[str],
    classification: str | None,
    purposes: Sequence[str],
    at: datetime,
) -> list[int]:
    """Insert ``(ordinal, heading path, fragment, text)`` rows of one document version,
    with its access; ``fts`` is the English text search vector of the heading path and
    the text. Their ids, in ordinal order."""
    if not rows:
        return []
    out = session.execute(
        sa.text(
            "INSERT INTO passages (tenant_id, document_id, document_version, ordinal, "
            "heading_path, fragment, text, acl, deny, classification, purposes, fts, "
            "recorded_at) "
            "SELECT :t, :d, :v, r.ordinal, "
            "ARRAY(SELECT jsonb_array_elements_text(r.path)), r.fragment, r.body, "
            "CAST(:acl AS jsonb), :deny, :cl, :p, "
            "to_tsvector('english', "
            "array_to_string(ARRAY(SELECT jsonb_array_elements_text(r.path)), ' ') "
            "|| ' ' || r.body), :at "
            "FROM jsonb_to_recordset(CAST(:rows AS jsonb)) "
            "AS r(ordinal int, path jsonb, fragment text, body text) "
            "ORDER BY r.ordinal RETURNING id, ordinal"
        ),
        {
            "t": tenant,
            "d": document_id,
            "v": version,
            "acl": json.dumps([list(a) for a in acl]),
            "deny": list(deny),
            "cl": classification,
            "p": list(purposes),
            "at": at,
            "rows": json.dumps(
                [{"ordinal": o, "path": list(p), "fragment": f, "body": b} for o, p, f, b in rows]
            ),
        },
    ).all()
    return [int(r.id) for r in sorted(out, key=lambda r: r.ordinal)]


def document_passages(
    *, session: Session, tenant: str, document_id: str, version: int
) -> list[sa.Row[Any]]:
    """The passages of one document version, in document order."""
    return list(
        session.execute(
            sa.text(
                f"SELECT {_PASSAGE_FIELDS} FROM passages WHERE tenant_id = :t "
                "AND document_id = :d AND document_version = :v ORDER BY ordinal"
            ),
            {"t": tenant, "d": document_id, "v": version},
        ).all()
    )


def passage_counts(*, session: Session, tenant: str) -> dict[tuple[str, int], int]:
    """How many passages each document version has that are not withdrawn."""
    rows = session.execute(
        sa.text(
            "SELECT document_id, document_version, count(*) AS n FROM passages "
            "WHERE tenant_id = :t AND withdrawn_at IS NULL "
            "GROUP BY document_id, document_version"
        ),
        {"t": tenant},
    ).all()
    return {(str(r[0]), int(r[1])): int(r[2]) for r in rows}


def withdraw_passages(
    *,
    session: Session,
    tenant: str,
    document_id: str,
    version: int | None,
    reason: str,
    at: datetime,
) -> int:
    """Withdraw the live passages of a document (one version; None: every version) with
    ``reason``; for ``redacted``, those withdrawn before too (a redacted passage is never
    read, not even as of a time before). The number changed."""
    live = "" if reason == "redacted" else " AND withdrawn_at IS NULL"
    of_version = "" if version is None else " AND document_version = :v"
    result = session.execute(
        sa.text(
            "UPDATE passages SET withdrawn_at = coalesce(withdrawn_at, :at), "
            "withdrawn_reason = :reason "
            f"WHERE tenant_id = :t AND document_id = :d{of_version}{live}"
        ),
        {"t": tenant, "d": document_id, "v": version, "reason": reason, "at": at},
    )
    return int(cast(sa.CursorResult[Any], result).rowcount)


def revoke_document(
    *, session: Session, tenant: str, document_id: str, version: int, at: datetime, actor: str
) -> None:
    session.execute(
        sa.text(
            "UPDATE documents SET revoked_at = :at, revoked_by = :by "
            "WHERE tenant_id = :t AND id = :id AND version = :v"
        ),
        {"t": tenant, "id": document_id, "v": version, "at": at, "by": actor},
    )


def redact_document(*, session: Session, tenant: str, document_id: str, at: datetime) -> None:
    """Mark every version of a document redacted."""
    session.execute(
        sa.text(
            "UPDATE documents SET redacted_at = :at "
            "WHERE tenant_id = :t AND id = :id AND redacted_at IS NULL"
        ),
        {"t": tenant, "id": document_id, "at": at},
    )


def insert_evidence_rows(
    *,
    session: Session,
    tenant: str,
    rows: Sequence[tuple[str, str | None, str | None]],
    readers: Sequence[str],
    deny: Sequence[str],
    classification: str | None,
    at: datetime,
    actor: str,
) -> list[str]:
    """Insert ``(id, title, uri)`` evidence rows with one access, skipping ids that exist;
    the ids inserted."""
    if not rows:
        return []
    out = session.execute(
        sa.text(
            "INSERT INTO evidence (tenant_id, id, title, uri, readers, recorded_at, "
            "recorded_by, deny, classification) "
            "SELECT :t, r.id, r.title, r.uri, :r, :at, :by, :deny, :cl "
            "FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(id text, title text, uri text) "
            "ON CONFLICT DO NOTHING RETURNING id"
        ),
        {
            "t": tenant,
            "r": list(readers),
            "at": at,
            "by": actor,
            "deny": list(deny),
            "cl": classification,
            "rows": json.dumps([{"id": i, "title": t, "uri": u} for i, t, u in rows]),
        },
    ).all()
    return [str(r.id) for r in out]


# --- agent turns for the server-side extractor (migration 0031) ----------------------

_TURN_COLUMNS = (
    "turn_id, principal, actor, turn, digest, state, attempts, next_attempt_at, "
    "last_error, outcomes, submitted_at, updated_at, done_at"
)


def insert_turn(
    *,
    session: Session,
    tenant: str,
    turn_id: str,
    principal: str,
    actor: dict[str, Any],
    turn: dict[str, Any],
    digest: str,
    now: datetime,
) -> sa.Row[Any] | None:
    """Queue a turn, due at once; None when the tenant already has one with that id."""
    return session.execute(
        sa.text(
            f"""INSERT INTO agent_turns (tenant_id, turn_id, principal, actor, turn, digest,
                state, attempts, next_attempt_at, submitted_at, updated_at)
            VALUES (:t, :id, :p, CAST(:actor AS jsonb), CAST(:turn AS jsonb), :digest,
                'queued', 0, :now, :now, :now)
            ON CONFLICT (tenant_id, turn_id) DO NOTHING
            RETURNING {_TURN_COLUMNS}"""
        ),
        {
            "t": tenant,
            "id": turn_id,
            "p": principal,
            "actor": json.dumps(actor),
            "turn": json.dumps(turn),
            "digest": digest,
            "now": now,
        },
    ).first()


def turn_row(*, session: Session, tenant: str, turn_id: str) -> sa.Row[Any] | None:
    """One turn of the tenant, or None."""
    return session.execute(
        sa.text(f"SELECT {_TURN_COLUMNS} FROM agent_turns WHERE tenant_id = :t AND turn_id = :id"),
        {"t": tenant, "id": turn_id},
    ).first()


def turn_rows(
    *,
    session: Session,
    tenant: str,
    principal: str | None,
    state: str | None,
    limit: int,
) -> list[sa.Row[Any]]:
    """The tenant's turns, newest first (``principal``'s only, unless None; of ``state``
    only, unless None), at most ``limit``."""
    return list(
        session.execute(
            sa.text(
                f"""SELECT {_TURN_COLUMNS} FROM agent_turns WHERE tenant_id = :t
                AND (CAST(:p AS text) IS NULL OR principal = :p)
                AND (CAST(:s AS text) IS NULL OR state = :s)
                ORDER BY submitted_at DESC, turn_id LIMIT :n"""
            ),
            {"t": tenant, "p": principal, "s": state, "n": limit},
        )
    )


def turn_counts(*, session: Session, tenant: str) -> dict[str, int]:
    """How many of the tenant's turns are in each state."""
    rows = session.execute(
        sa.text("SELECT state, count(*) FROM agent_turns WHERE tenant_id = :t GROUP BY state"),
        {"t": tenant},
    )
    return {str(state): int(n) for state, n in rows}


def claim_turns(
    *, session: Session, tenant: str, now: datetime, lease_until: datetime, limit: int
) -> list[sa.Row[Any]]:
    """Take up to ``limit`` queued turns due at ``now``, oldest due first, skipping rows
    another transaction holds: each is counted as an attempt and leased (not due again
    before ``lease_until``, so a worker that dies mid-call leaves it to the next)."""
    return list(
        session.execute(
            sa.text(
                f"""UPDATE agent_turns a SET attempts = a.attempts + 1,
                    next_attempt_at = :lease, updated_at = :now
                FROM (SELECT turn_id FROM agent_turns
                      WHERE tenant_id = :t AND state = 'queued' AND next_attempt_at <= :now
                      ORDER BY next_attempt_at, turn_id LIMIT :n
                      FOR UPDATE SKIP LOCKED) due
                WHERE a.tenant_id = :t AND a.turn_id = due.turn_id
                RETURNING {", ".join("a." + c for c in _TURN_COLUMNS.split(", "))}"""
            ),
            {"t": tenant, "now": now, "lease": lease_until, "n": limit},
        )
    )


def settle_turn(
    *,
    session: Session,
    tenant: str,
    turn_id: str,
    state: str,
    now: datetime,
    next_attempt_at: datetime | None = None,
    last_error: str | None = None,
    outcomes: list[dict[str, Any]] | None = None,
) -> None:
    """Move a turn to ``state``: ``queued`` again (due at ``next_attempt_at``), or
    ``done`` / ``failed`` (finished at ``now``), with its last error and outcomes."""
    session.execute(
        sa.text(
            """UPDATE agent_turns SET state = CAST(:s AS varchar), updated_at = :now,
                next_attempt_at = COALESCE(CAST(:next AS timestamptz), next_attempt_at),
                last_error = :err,
                outcomes = COALESCE(CAST(:out AS jsonb), outcomes),
                done_at = CASE WHEN CAST(:s AS varchar) = 'queued' THEN NULL
                               ELSE CAST(:now AS timestamptz) END
            WHERE tenant_id = :t AND turn_id = :id"""
        ),
        {
            "t": tenant,
            "id": turn_id,
            "s": state,
            "now": now,
            "next": next_attempt_at,
            "err": last_error,
            "out": None if outcomes is None else json.dumps(outcomes),
        },
    )
