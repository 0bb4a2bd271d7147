"""The audit chain hashes a digest of each row's detail, so that forget can erase it

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03

model §7, "Erasure that keeps the chain": ``forget`` removes the free-text detail of
the audit rows about the forgotten items, and ``caveat audit verify`` still passes.

- ``audit_log.detail_digest``: SHA-256 of the detail's canonical JSON. A row's hash
  now covers ``[tenant, seq, at, actor, action, item_id, code, detail_digest]``: the
  structural fields as they are, the erasable detail through its digest.
  ``detail`` becomes nullable: NULL is an erased detail, its digest kept.
- Every tenant's chain is re-chained: the old chain is verified first (a broken one
  stops the migration, naming the tenant and the row: repair or restore it, then
  migrate again), then every row gets its digest and its new hash, and one
  ``rechain`` row per tenant with rows records both heads (``old_head``, the head of
  the chain as it was; ``new_head``, the head of the same rows re-chained, which the
  ``rechain`` row links to).
- The append-only trigger lets exactly one update through: a detail set to NULL,
  every other column unchanged. The application role still has no UPDATE on the
  table: it erases through ``caveat_erase_audit`` (SECURITY DEFINER, the tenant the
  transaction's, only under an ``erasures`` record this same transaction inserted,
  never a ``forget`` or ``rechain`` row).
- ``caveat_append_audit`` takes the digests of the distinct details beside them.
- ``MAINTAIN`` (PostgreSQL 17 and later) on the tables an erasure touches, to the
  application role, so the erasure's ``VACUUM`` runs as that role; on an older
  server the grant is skipped with a notice (docs/operations.md says what then).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APP_ROLE = "caveat_app"
GENESIS = "0" * 64
ACTOR = "migration:0023"

#: The tables whose dead row versions an erasure vacuums (lifecycle.forget).
ERASED_TABLES = (
    "items",
    "item_embeddings",
    "embed_queue",
    "audit_log",
    "item_usage",
    "case_context",
    "citations",
    "shadow_log",
    "expiry_checks",
    "evidence_links",
    "item_confidence",
    "skill_enforcement",
)

OLD_APPEND = (
    "caveat_append_audit(bigint, text, timestamptz, text[], text[], text[], jsonb[], "
    "int[], bigint[], text[])"
)
APPEND = (
    "caveat_append_audit(bigint, text, timestamptz, text[], text[], text[], jsonb[], "
    "text[], int[], bigint[], text[])"
)
ERASE = "caveat_erase_audit(bigint, bigint[])"

APPEND_FUNCTION = """
CREATE FUNCTION caveat_append_audit(
    p_seq bigint, p_prev text, p_at timestamptz,
    p_actors text[], p_actions text[], p_codes text[], p_details jsonb[], p_digests text[],
    p_kind int[], p_item bigint[], p_hash text[]
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    tenant text := nullif(current_setting('caveat.tenant', true), '');
    n integer := coalesce(cardinality(p_hash), 0);
    kinds integer := coalesce(cardinality(p_actors), 0);
    appended bigint;
BEGIN
    IF tenant IS NULL THEN
        RAISE EXCEPTION 'caveat_append_audit: the transaction names no tenant'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_seq IS NULL OR p_seq < 1 OR p_prev IS NULL OR p_at IS NULL
       OR coalesce(cardinality(p_kind), 0) <> n OR coalesce(cardinality(p_item), 0) <> n
       OR coalesce(cardinality(p_actions), 0) <> kinds
       OR coalesce(cardinality(p_codes), 0) <> kinds
       OR coalesce(cardinality(p_details), 0) <> kinds
       OR coalesce(cardinality(p_digests), 0) <> kinds THEN
        RAISE EXCEPTION 'caveat_append_audit: a run needs its first seq and prev_hash, '
            'an instant, and arrays of matching lengths'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO public.audit_log
        (tenant_id, seq, at, actor, action, item_id, code, detail, detail_digest,
         prev_hash, hash)
    SELECT tenant, p_seq + r.pos - 1, p_at, k.actor, k.action, r.item_id, k.code, k.detail,
           k.digest, r.prev_hash, r.hash
    FROM unnest(p_kind, p_item, array_prepend(p_prev, trim_array(p_hash, 1)), p_hash)
         WITH ORDINALITY AS r(kind, item_id, prev_hash, hash, pos)
    JOIN unnest(p_actors, p_actions, p_codes, p_details, p_digests)
         WITH ORDINALITY AS k(actor, action, code, detail, digest, kind) ON k.kind = r.kind;
    GET DIAGNOSTICS appended = ROW_COUNT;
    IF appended <> n THEN
        RAISE EXCEPTION 'caveat_append_audit: % of % rows name no (actor, action, code, detail)',
            n - appended, n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN appended;
END
$$;
"""

ERASE_FUNCTION = """
CREATE FUNCTION caveat_erase_audit(p_erasure bigint, p_seqs bigint[]) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    tenant text := nullif(current_setting('caveat.tenant', true), '');
    erased bigint;
BEGIN
    IF tenant IS NULL THEN
        RAISE EXCEPTION 'caveat_erase_audit: the transaction names no tenant'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- only the erasure this transaction recorded: its row's xmin is this transaction
    IF NOT EXISTS (SELECT 1 FROM public.erasures e
                   WHERE e.tenant_id = tenant AND e.id = p_erasure
                   AND e.xmin = pg_current_xact_id()::xid) THEN
        RAISE EXCEPTION 'caveat_erase_audit: no erasure % recorded by this transaction '
            'in this tenant', p_erasure
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM public.audit_log
               WHERE tenant_id = tenant AND seq = ANY (p_seqs)
               AND action IN ('forget', 'rechain')) THEN
        RAISE EXCEPTION 'caveat_erase_audit: a forget or rechain row keeps its detail'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    UPDATE public.audit_log SET detail = NULL
    WHERE tenant_id = tenant AND seq = ANY (p_seqs) AND detail IS NOT NULL;
    GET DIAGNOSTICS erased = ROW_COUNT;
    RETURN erased;
END
$$;
"""

TRIGGER_FUNCTION = """
CREATE OR REPLACE FUNCTION caveat_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- the one update allowed: an erasure, the detail set to NULL, nothing else changed
    IF TG_OP = 'UPDATE' AND OLD.detail IS NOT NULL AND NEW.detail IS NULL
       AND to_jsonb(NEW) - 'detail' = to_jsonb(OLD) - 'detail' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'audit_log is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
"""

OLD_TRIGGER_FUNCTION = """
CREATE OR REPLACE FUNCTION caveat_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
"""


def _grant(statement: str) -> str:
    return f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        EXECUTE '{statement}';
    END IF;
END $$;
"""


def _maintain(grant: str) -> str:
    """``grant`` (``GRANT MAINTAIN ON ... TO``, or its REVOKE) where the server has it."""
    return f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        RETURN;
    END IF;
    IF current_setting('server_version_num')::int < 170000 THEN
        RAISE NOTICE 'PostgreSQL before 17 has no MAINTAIN privilege: an erasure''s VACUUM '
            'runs as the owner (docs/operations.md)';
        RETURN;
    END IF;
    EXECUTE '{grant}';
END $$;
"""


_TABLES = ", ".join(ERASED_TABLES)


# --- the chain, frozen as this migration knows it -------------------------------------


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _as_jsonb_reads_it(text: str) -> int | float:
    if "e" in text or "E" in text:
        exact = Decimal(text)
        if exact == exact.to_integral_value():
            return int(exact)
    return float(text)


def _detail_digest(detail: Any) -> str:
    loaded = json.loads(_canonical(detail or {}), parse_float=_as_jsonb_reads_it)
    return hashlib.sha256(_canonical(loaded).encode()).hexdigest()


def _hash(prev: str, tenant: str, row: Any, last: str) -> str:
    """The row's hash; ``last`` is the canonical text of the body's last element (the
    detail before this migration, the quoted digest after it)."""
    enc = json.encoder.encode_basestring_ascii
    body = ",".join(
        (
            "[" + enc(tenant),
            str(row.seq),
            enc(row.at.astimezone(UTC).isoformat(timespec="microseconds")),
            enc(row.actor),
            enc(row.action),
            "null" if row.item_id is None else str(row.item_id),
            "null" if row.code is None else enc(row.code),
            last + "]",
        )
    )
    return hashlib.sha256(f"{prev}|{body}".encode()).hexdigest()


def _old(prev: str, tenant: str, row: Any) -> str:
    return _hash(prev, tenant, row, _canonical(row.detail))


def _new(prev: str, tenant: str, row: Any, digest: str) -> str:
    return _hash(prev, tenant, row, json.encoder.encode_basestring_ascii(digest))


class ChainBroken(RuntimeError):
    """A tenant's chain does not verify: the migration stops before changing it."""


_ROWS = sa.text(
    "SELECT seq, at, actor, action, item_id, code, detail, prev_hash, hash "
    "FROM audit_log WHERE tenant_id = :t ORDER BY seq"
)


def _rechain(conn: sa.Connection, tenant: str, head_seq: int, head_hash: str | None) -> None:
    prev_old, prev_new, n = GENESIS, GENESIS, 0
    updates: list[dict[str, Any]] = []
    for row in conn.execute(_ROWS, {"t": tenant}):
        n += 1
        where = f"migration 0023: the audit chain of tenant {tenant!r} is broken at row {row.seq}"
        if row.seq != n:
            raise ChainBroken(f"{where}: seq {row.seq} where {n} due; nothing was changed")
        if row.prev_hash != prev_old or _old(prev_old, tenant, row) != row.hash:
            raise ChainBroken(
                f"{where} (`caveat audit verify --tenant {tenant}` shows it); nothing was "
                "changed: repair or restore the log, then migrate again"
            )
        digest = _detail_digest(row.detail)
        new = _new(prev_new, tenant, row, digest)
        updates.append({"t": tenant, "s": row.seq, "d": digest, "p": prev_new, "h": new})
        prev_old, prev_new = row.hash, new
    if n != head_seq or (head_hash or GENESIS) != prev_old:
        raise ChainBroken(
            f"migration 0023: the audit chain of tenant {tenant!r} ends at {n}, its head says "
            f"{head_seq}; nothing was changed"
        )
    if updates:
        conn.execute(
            sa.text(
                "UPDATE audit_log SET detail_digest = :d, prev_hash = :p, hash = :h "
                "WHERE tenant_id = :t AND seq = :s"
            ),
            updates,
        )
    if n == 0:
        return
    detail = {"old_head": prev_old, "new_head": prev_new, "rows": n, "migration": "0023"}
    digest = _detail_digest(detail)
    at = datetime.now(UTC)
    mark = _Row(seq=n + 1, at=at, actor=ACTOR, action="rechain", item_id=None, code=None)
    digest_hash = _new(prev_new, tenant, mark, digest)
    conn.execute(
        sa.text(
            "INSERT INTO audit_log (tenant_id, seq, at, actor, action, item_id, code, detail, "
            "detail_digest, prev_hash, hash) VALUES (:t, :s, :at, :actor, 'rechain', NULL, "
            "NULL, CAST(:detail AS jsonb), :d, :p, :h)"
        ),
        {
            "t": tenant,
            "s": n + 1,
            "at": at,
            "actor": ACTOR,
            "detail": _canonical(detail),
            "d": digest,
            "p": prev_new,
            "h": digest_hash,
        },
    )
    conn.execute(
        sa.text("UPDATE tenants SET audit_seq = :s, audit_hash = :h WHERE id = :t"),
        {"s": n + 1, "h": digest_hash, "t": tenant},
    )


class _Row:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _tenants(conn: sa.Connection) -> list[tuple[str, int, str | None]]:
    return [
        (str(r[0]), int(r[1] or 0), r[2])
        for r in conn.execute(
            sa.text(
                "SELECT t.id, t.audit_seq, t.audit_hash FROM tenants t "
                "UNION SELECT DISTINCT a.tenant_id, 0, NULL FROM audit_log a "
                "WHERE NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = a.tenant_id) ORDER BY 1"
            )
        )
    ]


def _unbound() -> None:
    """The migrating owner sees every tenant's rows, and may update audit rows."""
    for table in ("audit_log", "tenants"):
        op.execute(f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update")


def _bound() -> None:
    op.execute("ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update")
    for table in ("audit_log", "tenants"):
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")


def upgrade() -> None:
    conn = op.get_bind()
    op.add_column("audit_log", sa.Column("detail_digest", sa.String(), nullable=True))
    op.alter_column("audit_log", "detail", nullable=True)
    _unbound()
    for tenant, head_seq, head_hash in _tenants(conn):
        _rechain(conn, tenant, head_seq, head_hash)
    _bound()
    op.alter_column("audit_log", "detail_digest", nullable=False)
    op.execute(TRIGGER_FUNCTION)
    op.execute(f"DROP FUNCTION IF EXISTS {OLD_APPEND}")
    op.execute(APPEND_FUNCTION)
    op.execute(ERASE_FUNCTION)
    for fn in (APPEND, ERASE):
        op.execute(f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC")
        op.execute(_grant(f"GRANT EXECUTE ON FUNCTION {fn} TO {APP_ROLE}"))
    op.execute(_maintain(f"GRANT MAINTAIN ON {_TABLES} TO {APP_ROLE}"))


def downgrade() -> None:
    """Back to the chain over the details themselves: refused once a detail was erased
    (the old chain cannot hold a row without its detail)."""
    conn = op.get_bind()
    _unbound()
    erased = conn.execute(sa.text("SELECT count(*) FROM audit_log WHERE detail IS NULL")).scalar()
    if erased:
        _bound()
        raise ChainBroken(
            f"migration 0023 down: {erased} audit rows had their detail erased; the chain "
            "before 0023 cannot hold them"
        )
    for tenant, _, _ in _tenants(conn):
        prev, updates = GENESIS, []
        for row in conn.execute(_ROWS, {"t": tenant}):
            new = _old(prev, tenant, row)
            updates.append({"t": tenant, "s": row.seq, "p": prev, "h": new})
            prev = new
        if updates:
            conn.execute(
                sa.text(
                    "UPDATE audit_log SET prev_hash = :p, hash = :h "
                    "WHERE tenant_id = :t AND seq = :s"
                ),
                updates,
            )
            conn.execute(
                sa.text("UPDATE tenants SET audit_hash = :h WHERE id = :t"),
                {"h": prev, "t": tenant},
            )
    _bound()
    op.execute(_maintain(f"REVOKE MAINTAIN ON {_TABLES} FROM {APP_ROLE}"))
    op.execute(f"DROP FUNCTION IF EXISTS {ERASE}")
    op.execute(f"DROP FUNCTION IF EXISTS {APPEND}")
    op.execute(OLD_TRIGGER_FUNCTION)
    op.execute("ALTER TABLE audit_log DROP COLUMN detail_digest")
    op.alter_column("audit_log", "detail", nullable=False)
    # the old bulk append (migration 0014)
    import importlib

    m14 = importlib.import_module("migrations.versions.0014_tenant_append")
    op.execute(m14.FUNCTION)
    op.execute(m14.GRANTS)
