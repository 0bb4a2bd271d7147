"""recall at scale: facts as they are now, a world version, observations read in SQL

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

- ``facts_current``: the latest observation per ``(tenant, subject,
  attribute)``, kept current by a statement trigger on ``facts`` (the latest
  by ``observed_at``, then by fact id, the order every snapshot reads). A
  live recall reads one primary-key probe per condition instead of a
  ``DISTINCT ON`` over the whole history; the history stays in ``facts``
  for ``as_of``.
- ``tenants.world_version``: a value drawn from a sequence whenever the
  tenant's schema, entities, aliases, edges or policy change, so a process
  may cache the world and know, in one read, whether its copy is current.
  Sequence values are never reused, even by rolled-back transactions, so a
  version names one world only.
- ``caveat_observed`` and ``caveat_applies_at``: applicability in SQL,
  against only the observations an item's conditions name, with inline
  observations overlaid, ``max_age`` and the verify-on-next-use ``since``.
- ``ix_items_current_recent``: current items of a tenant by recency, for the
  recall stage that fills an answer with items no query term matched.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CURRENT = "current_setting('caveat.tenant', true)"

#: Upsert the latest of ``{new}``'s facts into ``facts_current``.
_LATEST = """
INSERT INTO facts_current AS fc (tenant_id, subject, attribute, fact_id, value,
                                 observed_at, recorded_at, source)
SELECT DISTINCT ON (tenant_id, subject, attribute)
       tenant_id, subject, attribute, id, value, observed_at, recorded_at, source
FROM {new}
ORDER BY tenant_id, subject, attribute, observed_at DESC, id DESC
ON CONFLICT (tenant_id, subject, attribute) DO UPDATE SET
    fact_id = EXCLUDED.fact_id, value = EXCLUDED.value, observed_at = EXCLUDED.observed_at,
    recorded_at = EXCLUDED.recorded_at, source = EXCLUDED.source
WHERE (EXCLUDED.observed_at, EXCLUDED.fact_id) > (fc.observed_at, fc.fact_id)
"""

#: Tables whose change changes a tenant's world (``factgen.load_world``).
WORLD_TABLES = ("fact_schema", "entities", "entity_aliases", "entity_edges")

FUNCTIONS = r"""
-- The observation that counts for (subject, attribute) at `at`, or NULL.
-- inline: {subject: {attribute: encoded}} given with the query (observed at `at`,
--   taking precedence). declared: {"exact": {attribute: max_age seconds | null},
--   "patterns": [[regex, max_age seconds | null], ...]}: an attribute that is not
--   declared has no observation; one older than its max_age has none either.
-- live: read facts_current (the latest observation); otherwise, or when the latest
--   is later than `at`, the history as known at `at`. since: an observation made
--   before it does not count (the verify-on-next-use check).
CREATE OR REPLACE FUNCTION caveat_observed(
    p_tenant text, p_subject text, p_attribute text, p_at timestamptz,
    p_since timestamptz, p_inline jsonb, p_declared jsonb, p_live boolean)
RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $caveat$
DECLARE
    v jsonb;
    o timestamptz;
    r timestamptz;
    age jsonb;
    pat jsonb;
    found_decl boolean := false;
BEGIN
    v := p_inline -> p_subject -> p_attribute;
    IF v IS NOT NULL THEN
        RETURN v;
    END IF;
    IF p_declared -> 'exact' ? p_attribute THEN
        age := p_declared -> 'exact' -> p_attribute;
        found_decl := true;
    ELSE
        FOR pat IN SELECT x FROM jsonb_array_elements(p_declared -> 'patterns') AS x LOOP
            IF p_attribute ~ (pat ->> 0) THEN
                age := pat -> 1;
                found_decl := true;
                EXIT;
            END IF;
        END LOOP;
    END IF;
    IF NOT found_decl THEN
        RETURN NULL;
    END IF;
    IF p_live THEN
        SELECT f.value, f.observed_at, f.recorded_at INTO v, o, r FROM facts_current f
        WHERE f.tenant_id = p_tenant AND f.subject = p_subject AND f.attribute = p_attribute;
        IF v IS NULL THEN
            RETURN NULL;
        END IF;
    END IF;
    IF NOT p_live OR o > p_at OR r > p_at THEN
        SELECT f.value, f.observed_at INTO v, o FROM facts f
        WHERE f.tenant_id = p_tenant AND f.subject = p_subject AND f.attribute = p_attribute
          AND f.observed_at <= p_at AND f.recorded_at <= p_at
        ORDER BY f.observed_at DESC, f.id DESC LIMIT 1;
        IF v IS NULL THEN
            RETURN NULL;
        END IF;
    END IF;
    IF jsonb_typeof(age) = 'number' AND p_at - o > make_interval(secs => (age #>> '{}')::float8) THEN
        RETURN NULL;
    END IF;
    IF p_since IS NOT NULL AND o < p_since THEN
        RETURN NULL;
    END IF;
    RETURN v;
END
$caveat$;

-- Does an item apply at `at`? The rule of caveat_applies (every required condition
-- TRUE, every excluded one FALSE, UNKNOWN never granted, never NULL), reading each
-- condition's observation with caveat_observed instead of from a snapshot document.
CREATE OR REPLACE FUNCTION caveat_applies_at(
    p_tenant text, p_conditions jsonb, p_subject text, p_at timestamptz,
    p_since timestamptz, p_inline jsonb, p_declared jsonb, p_live boolean)
RETURNS boolean
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $caveat$
DECLARE
    req jsonb := coalesce(p_conditions -> 'required', '[]'::jsonb);
    exc jsonb := coalesce(p_conditions -> 'excluded', '[]'::jsonb);
    c jsonb;
BEGIN
    IF p_conditions IS NULL THEN
        RETURN true;
    END IF;
    IF jsonb_typeof(p_conditions) <> 'object'
            OR jsonb_typeof(req) <> 'array' OR jsonb_typeof(exc) <> 'array' THEN
        RETURN false;
    END IF;
    FOR c IN SELECT x FROM jsonb_array_elements(req) AS x LOOP
        IF caveat_eval(c, caveat_observed(p_tenant, coalesce(c ->> 'e', p_subject), c ->> 'a',
                p_at, p_since, p_inline, p_declared, p_live)) IS NOT TRUE THEN
            RETURN false;
        END IF;
    END LOOP;
    FOR c IN SELECT x FROM jsonb_array_elements(exc) AS x LOOP
        IF caveat_eval(c, caveat_observed(p_tenant, coalesce(c ->> 'e', p_subject), c ->> 'a',
                p_at, p_since, p_inline, p_declared, p_live)) IS NOT FALSE THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$caveat$;
"""


def upgrade() -> None:
    op.create_table(
        "facts_current",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("attribute", sa.String(), nullable=False),
        sa.Column("fact_id", sa.BigInteger(), nullable=False),
        sa.Column("value", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("tenant_id", "subject", "attribute"),
    )
    op.execute(
        f"""
        CREATE FUNCTION caveat_facts_current() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            {_LATEST.format(new="new_facts")};
            RETURN NULL;
        END $$;
        CREATE TRIGGER facts_current AFTER INSERT ON facts
            REFERENCING NEW TABLE AS new_facts
            FOR EACH STATEMENT EXECUTE FUNCTION caveat_facts_current();
        """
    )
    op.execute(_LATEST.format(new="facts"))
    for table in ("facts_current",):
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING (tenant_id = {_CURRENT}) WITH CHECK (tenant_id = {_CURRENT})"
        )

    op.execute("CREATE SEQUENCE world_version_seq")
    op.add_column(
        "tenants",
        sa.Column("world_version", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.execute(
        """
        CREATE FUNCTION caveat_world_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE tenants SET world_version = nextval('world_version_seq')
            WHERE id IN (SELECT tenant_id FROM changed_rows);
            RETURN NULL;
        END $$;
        CREATE FUNCTION caveat_policy_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.policy IS DISTINCT FROM OLD.policy THEN
                NEW.world_version := nextval('world_version_seq');
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER tenants_policy_changed BEFORE UPDATE OF policy ON tenants
            FOR EACH ROW EXECUTE FUNCTION caveat_policy_changed();
        """
    )
    for table in WORLD_TABLES:
        for verb, ref in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")):
            op.execute(
                f"CREATE TRIGGER {table}_world_{verb.lower()} AFTER {verb} ON {table} "
                f"REFERENCING {ref} TABLE AS changed_rows "
                "FOR EACH STATEMENT EXECUTE FUNCTION caveat_world_changed()"
            )
    op.execute(FUNCTIONS)
    op.create_index(
        "ix_items_current_recent",
        "items",
        ["tenant_id", sa.literal_column("recorded_at DESC"), "id"],
        postgresql_where=sa.text("superseded_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_items_current_recent", table_name="items")
    op.execute(
        "DROP FUNCTION IF EXISTS caveat_applies_at(text, jsonb, text, timestamptz, timestamptz, "
        "jsonb, jsonb, boolean)"
    )
    op.execute(
        "DROP FUNCTION IF EXISTS caveat_observed(text, text, text, timestamptz, timestamptz, "
        "jsonb, jsonb, boolean)"
    )
    for table in WORLD_TABLES:
        for verb in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_world_{verb} ON {table}")
    op.execute("DROP TRIGGER IF EXISTS tenants_policy_changed ON tenants")
    op.execute("DROP FUNCTION IF EXISTS caveat_policy_changed()")
    op.execute("DROP FUNCTION IF EXISTS caveat_world_changed()")
    op.drop_column("tenants", "world_version")
    op.execute("DROP SEQUENCE IF EXISTS world_version_seq")
    op.execute("DROP TRIGGER IF EXISTS facts_current ON facts")
    op.execute("DROP FUNCTION IF EXISTS caveat_facts_current()")
    op.drop_table("facts_current")
