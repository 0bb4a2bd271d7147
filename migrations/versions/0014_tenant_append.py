"""Bulk appends to the audit log at the application role: one SECURITY DEFINER function

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

PostgreSQL refuses ``COPY FROM`` into a table whose row-level security applies to
the user, so ``caveat_app`` appended a revocation's 100,001 audit rows through a
temporary staging table and one ``INSERT … SELECT`` after it (issue 14, figure 7:
1.3 s where the owner's ``COPY`` takes 0.8 s). ``caveat_append_audit`` appends a run
of rows to the audit log in one call, several calls in flight while the next rows
are hashed:

- the tenant is the transaction's ``caveat.tenant`` (the setting the policies read);
  the function takes no tenant, so no row can name another one, and it refuses a
  transaction that names none (``insufficient_privilege``, as the policies do);
- a call appends one contiguous, linked run: ``seq`` is ``p_seq``, ``p_seq + 1``, ...;
  each row's ``prev_hash`` is the hash of the row before it, the first one's
  ``p_prev``. Rows are only ever inserted (the primary key ``(tenant_id, seq)``
  refuses a position already taken; the append-only triggers still hold), so the
  function can do nothing to the chain that an ``INSERT`` under the policies cannot;
- the rows' distinct ``(actor, action, code, detail)`` are passed once
  (``p_actors``, ``p_actions``, ``p_codes``, ``p_details``) and each row names its
  own by position (``p_kind``, from 1): a cascade's rows share a handful;
- ``search_path`` is pinned (``pg_temp`` last: a temporary table of the caller's
  cannot stand in for ``audit_log``), EXECUTE is revoked from PUBLIC and granted to
  ``caveat_app`` only. It writes ``audit_log`` and nothing else.

The catalog test (tests/caveat/test_isolation.py) lists it by name as the one
SECURITY DEFINER function, with its reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APP_ROLE = "caveat_app"
SIGNATURE = (
    "caveat_append_audit(bigint, text, timestamptz, text[], text[], text[], jsonb[], "
    "int[], bigint[], text[])"
)

FUNCTION = """
CREATE FUNCTION caveat_append_audit(
    p_seq bigint, p_prev text, p_at timestamptz,
    p_actors text[], p_actions text[], p_codes text[], p_details jsonb[],
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
       OR coalesce(cardinality(p_details), 0) <> kinds THEN
        RAISE EXCEPTION 'caveat_append_audit: a run needs its first seq and prev_hash, '
            'an instant, and arrays of matching lengths'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF n = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO public.audit_log
        (tenant_id, seq, at, actor, action, item_id, code, detail, prev_hash, hash)
    SELECT tenant, p_seq + r.pos - 1, p_at, k.actor, k.action, r.item_id, k.code, k.detail,
           r.prev_hash, r.hash
    FROM unnest(p_kind, p_item, array_prepend(p_prev, trim_array(p_hash, 1)), p_hash)
         WITH ORDINALITY AS r(kind, item_id, prev_hash, hash, pos)
    JOIN unnest(p_actors, p_actions, p_codes, p_details)
         WITH ORDINALITY AS k(actor, action, code, detail, kind) ON k.kind = r.kind;
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

GRANTS = f"""
REVOKE ALL ON FUNCTION {SIGNATURE} FROM PUBLIC;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        EXECUTE 'GRANT EXECUTE ON FUNCTION {SIGNATURE} TO {APP_ROLE}';
    END IF;
END $$;
"""


def upgrade() -> None:
    op.execute(FUNCTION)
    op.execute(GRANTS)


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {SIGNATURE}")
