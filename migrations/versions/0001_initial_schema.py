"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30

Tables of the walking skeleton: tenants, fact schema, entities, aliases,
topology, facts, principals, evidence, items (with the partial unique index
that makes at most one row per supersession key current), item transitions,
cases, the append-only, hash-chained audit log, and the SQL functions that
evaluate stored conditions against a fact snapshot (a copy of
``predicates.SQL_EVALUATOR_DDL`` as of this revision; a test checks that a
migrated database has exactly the functions the package defines, so a change
to the evaluator needs a new revision).
"""

from __future__ import annotations

from collections.abc import Sequence

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EVALUATOR = r"""
-- caveat predicate evaluator (predicates/_sql.py); docs/predicates.md.

-- Versions: arrays of integers compared per segment, missing segments read as 0.
CREATE OR REPLACE FUNCTION caveat_version_cmp(a jsonb, b jsonb) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $caveat$
DECLARE
    n integer := greatest(jsonb_array_length(a), jsonb_array_length(b));
    x numeric;
    y numeric;
BEGIN
    FOR i IN 0 .. n - 1 LOOP
        x := coalesce((a ->> i)::numeric, 0);
        y := coalesce((b ->> i)::numeric, 0);
        IF x < y THEN
            RETURN -1;
        ELSIF x > y THEN
            RETURN 1;
        END IF;
    END LOOP;
    RETURN 0;
END
$caveat$;

-- Three-way comparison of two encoded values of type t; NULL when not comparable.
CREATE OR REPLACE FUNCTION caveat_cmp(t text, a jsonb, b jsonb) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $caveat$
DECLARE
    ta text := jsonb_typeof(a);
    tb text := jsonb_typeof(b);
    x numeric;
    y numeric;
    s text;
    r text;
BEGIN
    IF ta IS NULL OR tb IS NULL OR ta <> tb THEN
        RETURN NULL;
    END IF;
    IF t IN ('int', 'float', 'duration', 'timestamp') THEN
        IF ta <> 'number' THEN
            RETURN NULL;
        END IF;
        x := (a #>> '{}')::numeric;
        y := (b #>> '{}')::numeric;
        RETURN CASE WHEN x < y THEN -1 WHEN x > y THEN 1 ELSE 0 END;
    ELSIF t IN ('string', 'enum') THEN
        IF ta <> 'string' THEN
            RETURN NULL;
        END IF;
        s := a #>> '{}';
        r := b #>> '{}';
        RETURN CASE
            WHEN s = r THEN 0
            WHEN s COLLATE "C" < r COLLATE "C" THEN -1
            ELSE 1
        END;
    ELSIF t = 'bool' THEN
        IF ta <> 'boolean' THEN
            RETURN NULL;
        END IF;
        RETURN CASE WHEN a = b THEN 0 WHEN a < b THEN -1 ELSE 1 END;
    ELSIF t = 'version' THEN
        IF ta <> 'array' THEN
            RETURN NULL;
        END IF;
        RETURN caveat_version_cmp(a, b);
    END IF;
    RETURN NULL;
END
$caveat$;

-- One condition against one observation: TRUE, FALSE or NULL (UNKNOWN).
-- No observation: UNKNOWN, except `exists`, which is FALSE.
-- An observation of another type than the condition's: UNKNOWN.
CREATE OR REPLACE FUNCTION caveat_eval(cond jsonb, obs jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $caveat$
DECLARE
    op text := cond ->> 'op';
    t text := cond ->> 't';
    lit jsonb := cond -> 'v';
    v jsonb;
    e jsonb;
    c integer;
    undecided boolean := false;
BEGIN
    IF cond IS NULL OR op IS NULL THEN
        RETURN NULL;
    END IF;
    IF obs IS NULL OR jsonb_typeof(obs) IS DISTINCT FROM 'object' THEN
        RETURN CASE WHEN op = 'exists' THEN false END;
    END IF;
    v := obs -> 'v';
    IF (obs ->> 't') IS DISTINCT FROM t OR v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN NULL;
    END IF;
    IF op = 'exists' THEN
        RETURN true;
    ELSIF op = 'in' OR op = 'not_in' THEN
        IF jsonb_typeof(lit) IS DISTINCT FROM 'array' THEN
            RETURN NULL;
        END IF;
        FOR e IN SELECT x FROM jsonb_array_elements(lit) AS x LOOP
            c := caveat_cmp(t, v, e);
            IF c = 0 THEN
                RETURN op = 'in';
            ELSIF c IS NULL THEN
                undecided := true;
            END IF;
        END LOOP;
        IF undecided THEN
            RETURN NULL;
        END IF;
        RETURN op = 'not_in';
    ELSIF op = 'contains' OR op = 'matches' THEN
        IF t <> 'string' OR jsonb_typeof(v) <> 'string'
                OR jsonb_typeof(lit) IS DISTINCT FROM 'string' THEN
            RETURN NULL;
        END IF;
        IF op = 'contains' THEN
            RETURN strpos(v #>> '{}', lit #>> '{}') > 0;
        END IF;
        RETURN (v #>> '{}') ~ (lit #>> '{}');
    END IF;
    c := caveat_cmp(t, v, lit);
    RETURN CASE op
        WHEN 'eq' THEN c = 0
        WHEN 'ne' THEN c <> 0
        WHEN 'lt' THEN c < 0
        WHEN 'lte' THEN c <= 0
        WHEN 'gt' THEN c > 0
        WHEN 'gte' THEN c >= 0
    END;
END
$caveat$;

-- Does an item apply? Every required condition TRUE and every excluded one
-- FALSE; UNKNOWN (NULL) is never granted. Never returns NULL.
-- conditions: {"required": [cond...], "excluded": [cond...]} (NULL or a
-- missing list means none); each cond has "a" (attribute path) and "e"
-- (entity or null: then `subject`). snapshot: {subject: {path: encoded obs}}.
CREATE OR REPLACE FUNCTION caveat_applies(conditions jsonb, snapshot jsonb, subject text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $caveat$
DECLARE
    req jsonb := coalesce(conditions -> 'required', '[]'::jsonb);
    exc jsonb := coalesce(conditions -> 'excluded', '[]'::jsonb);
    c jsonb;
BEGIN
    IF conditions IS NULL THEN
        RETURN true;
    END IF;
    IF jsonb_typeof(conditions) <> 'object'
            OR jsonb_typeof(req) <> 'array' OR jsonb_typeof(exc) <> 'array' THEN
        RETURN false;
    END IF;
    FOR c IN SELECT x FROM jsonb_array_elements(req) AS x LOOP
        IF caveat_eval(c, snapshot -> coalesce(c ->> 'e', subject) -> (c ->> 'a'))
                IS NOT TRUE THEN
            RETURN false;
        END IF;
    END LOOP;
    FOR c IN SELECT x FROM jsonb_array_elements(exc) AS x LOOP
        IF caveat_eval(c, snapshot -> coalesce(c ->> 'e', subject) -> (c ->> 'a'))
                IS NOT FALSE THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$caveat$;
"""

FUNCTIONS = (
    "caveat_applies(jsonb, jsonb, text)",
    "caveat_eval(jsonb, jsonb)",
    "caveat_cmp(text, jsonb, jsonb)",
    "caveat_version_cmp(jsonb, jsonb)",
)

AUDIT_APPEND_ONLY = """
CREATE FUNCTION caveat_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION caveat_audit_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION caveat_audit_append_only();
"""


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=True),
        sa.Column("code", sa.String(), nullable=True),
        sa.Column(
            "detail",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("prev_hash", sa.String(), nullable=False),
        sa.Column("hash", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant_id", "seq", name="uq_audit_tenant_seq"),
    )
    op.create_table(
        "cases",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("subjects", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=True),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("opened_by", sa.String(), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("closed_by", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_table(
        "entities",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_table(
        "entity_aliases",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("alias", sa.String(), nullable=False),
        sa.Column("entity_id", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "alias"),
    )
    op.create_table(
        "entity_edges",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("src", sa.String(), nullable=False),
        sa.Column("relation", sa.String(), nullable=False),
        sa.Column("dst", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "src", "relation", "dst"),
    )
    op.create_table(
        "evidence",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("title", sa.String(), nullable=True),
        sa.Column("uri", sa.String(), nullable=True),
        sa.Column("readers", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_by", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_table(
        "fact_schema",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("attribute", sa.String(), nullable=False),
        sa.Column("type", sa.String(), nullable=False),
        sa.Column("unit", sa.String(), nullable=True),
        sa.Column("max_age", sa.Interval(), nullable=True),
        sa.Column("content_type", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "attribute"),
    )
    op.create_table(
        "facts",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("attribute", sa.String(), nullable=False),
        sa.Column("value", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_facts_lookup",
        "facts",
        ["tenant_id", "subject", "attribute", sa.literal_column("observed_at DESC")],
        unique=False,
    )
    op.create_table(
        "item_transitions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), nullable=False),
        sa.Column("from_state", sa.String(), nullable=True),
        sa.Column("to_state", sa.String(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column(
            "cause",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_item_transitions_item_at", "item_transitions", ["item_id", "at"], unique=False
    )
    op.create_table(
        "items",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("attribute", sa.String(), nullable=False),
        sa.Column("object", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("required", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("excluded", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("conditions", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("cond_key", sa.String(), nullable=False),
        sa.Column("evidence", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("evidence_key", sa.String(), nullable=False),
        sa.Column(
            "derived_from", postgresql.ARRAY(sa.BigInteger()), server_default="{}", nullable=False
        ),
        sa.Column("epistemic", sa.String(), nullable=False),
        sa.Column("content_type", sa.String(), nullable=True),
        sa.Column("scope_axis", sa.String(), nullable=False),
        sa.Column("scope_id", sa.String(), nullable=False),
        sa.Column(
            "facets",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column("purposes", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column(
            "acl",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column("text", sa.String(), nullable=True),
        sa.Column("entities", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column("embedding", pgvector.sqlalchemy.vector.VECTOR(), nullable=True),
        sa.Column("salience", sa.Float(), nullable=False),
        sa.Column("valid_from", sa.DateTime(timezone=True), nullable=False),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("superseded_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("superseded_by", sa.BigInteger(), nullable=True),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("verified_by", sa.String(), nullable=True),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer(), nullable=True),
        sa.Column("release_state", sa.String(), nullable=True),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column(
            "fts",
            postgresql.TSVECTOR(),
            sa.Computed(
                "to_tsvector('english'::regconfig, coalesce(text, '') || ' ' || subject || ' ' || replace(attribute, '_', ' '))",
                persisted=True,
            ),
            nullable=True,
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_items_derived_from", "items", ["derived_from"], unique=False, postgresql_using="gin"
    )
    op.create_index("ix_items_fts", "items", ["fts"], unique=False, postgresql_using="gin")
    op.create_index("ix_items_tenant_subject", "items", ["tenant_id", "subject"], unique=False)
    op.create_index(
        "uq_items_current_key",
        "items",
        [
            "tenant_id",
            "scope_axis",
            "scope_id",
            "subject",
            "attribute",
            "kind",
            "cond_key",
            "evidence_key",
        ],
        unique=True,
        postgresql_where=sa.text("superseded_at IS NULL"),
    )
    op.create_table(
        "principals",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("capabilities", postgresql.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "id"),
    )
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column(
            "policy",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("audit_seq", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("audit_hash", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.execute(AUDIT_APPEND_ONLY)
    op.execute(EVALUATOR)


def downgrade() -> None:
    for fn in FUNCTIONS:
        op.execute(f"DROP FUNCTION IF EXISTS {fn}")
    op.execute("DROP FUNCTION IF EXISTS caveat_audit_append_only() CASCADE")
    op.drop_table("tenants")
    op.drop_table("principals")
    op.drop_index(
        "uq_items_current_key",
        table_name="items",
        postgresql_where=sa.text("superseded_at IS NULL"),
    )
    op.drop_index("ix_items_tenant_subject", table_name="items")
    op.drop_index("ix_items_fts", table_name="items", postgresql_using="gin")
    op.drop_index("ix_items_derived_from", table_name="items", postgresql_using="gin")
    op.drop_table("items")
    op.drop_index("ix_item_transitions_item_at", table_name="item_transitions")
    op.drop_table("item_transitions")
    op.drop_index("ix_facts_lookup", table_name="facts")
    op.drop_table("facts")
    op.drop_table("fact_schema")
    op.drop_table("evidence")
    op.drop_table("entity_edges")
    op.drop_table("entity_aliases")
    op.drop_table("entities")
    op.drop_table("cases")
    op.drop_table("audit_log")
