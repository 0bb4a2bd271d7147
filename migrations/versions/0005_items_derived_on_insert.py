"""compute the item's derived columns once, on insert

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

``fts`` and ``key_digest`` were stored generated columns, which PostgreSQL
recomputes on every UPDATE of the row, including the state-only updates of
the lifecycle (a revocation over 100,000 descendants re-ran ``to_tsvector``
100,000 times). Items never change in content, so the columns become plain
columns filled by a BEFORE INSERT trigger with the same expressions.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TEXT_VECTOR = (
    "to_tsvector('english'::regconfig, coalesce(NEW.text, '') || ' ' || NEW.subject || ' ' || "
    "replace(NEW.attribute, '_', ' '))"
)
KEY_DIGEST = (
    "md5(NEW.tenant_id || chr(31) || NEW.scope_axis || chr(31) || NEW.scope_id || chr(31) || "
    "NEW.subject || chr(31) || NEW.attribute || chr(31) || NEW.kind || chr(31) || "
    "NEW.cond_key || chr(31) || NEW.evidence_key)"
)


def upgrade() -> None:
    op.execute("ALTER TABLE items ALTER COLUMN fts DROP EXPRESSION")
    op.execute("ALTER TABLE items ALTER COLUMN key_digest DROP EXPRESSION")
    op.execute("ALTER TABLE items SET (fillfactor = 70)")
    op.execute(
        f"""
        CREATE FUNCTION caveat_items_derived() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.fts := {TEXT_VECTOR};
            NEW.key_digest := {KEY_DIGEST};
            RETURN NEW;
        END $$;
        CREATE TRIGGER items_derived BEFORE INSERT ON items
            FOR EACH ROW EXECUTE FUNCTION caveat_items_derived();
        """
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS items_derived ON items")
    op.execute("DROP FUNCTION IF EXISTS caveat_items_derived()")
    for column in ("fts", "key_digest"):
        op.execute(f"ALTER TABLE items DROP COLUMN {column}")
    op.execute(
        "ALTER TABLE items ADD COLUMN key_digest varchar GENERATED ALWAYS AS ("
        + KEY_DIGEST.replace("NEW.", "")
        + ") STORED"
    )
    op.execute(
        "ALTER TABLE items ADD COLUMN fts tsvector GENERATED ALWAYS AS ("
        + TEXT_VECTOR.replace("NEW.", "")
        + ") STORED"
    )
    op.execute("CREATE INDEX ix_items_fts ON items USING gin (fts)")
    op.execute(
        "CREATE INDEX ix_items_current_digest ON items (key_digest) WHERE superseded_at IS NULL"
    )
    op.execute("ALTER TABLE items RESET (fillfactor)")
