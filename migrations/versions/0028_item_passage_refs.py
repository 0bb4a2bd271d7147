"""Items citing a passage, found by an index the application role can use

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06

model §6, "Knowledge beside memory": a recalled passage lists the items that cite it
(``recall._queries.PASSAGES_CITED_BY``). Asked of ``items.evidence`` that is a scan of
every item of the tenant on every recall with knowledge (130-180 ms at 50,000 items,
docs/performance.md): under row-level security the planner uses an index only for
leakproof operators, and the array operators (``@>``, ``&&``) are not, so even a GIN
index on ``evidence`` is never read by ``caveat_app``.

``item_passage_refs`` holds, per item, each evidence id it cites that names a passage
(``doc:<document id>#<fragment>``), filled by a trigger on every insert into ``items``
(the write path, supersession, rollup, a bench's COPY alike: an item's evidence never
changes after its insert), and backfilled here. Looked up by text equality on its
primary key, which row-level security lets the planner use. Tenant-isolated and forced
like every tenant table; the application role reads it and inserts through the trigger.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CURRENT = "current_setting('caveat.tenant', true)"


def upgrade() -> None:
    op.create_table(
        "item_passage_refs",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("ref", sa.String(), nullable=False),
        sa.Column("item_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "ref", "item_id"),
    )
    op.execute("ALTER TABLE item_passage_refs ENABLE ROW LEVEL SECURITY")
    op.execute("ALTER TABLE item_passage_refs FORCE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON item_passage_refs "
        f"USING (tenant_id = {_CURRENT}) WITH CHECK (tenant_id = {_CURRENT})"
    )
    op.execute(
        """
        DO $$ BEGIN
            IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'caveat_app') THEN
                REVOKE ALL ON item_passage_refs FROM caveat_app;
                GRANT SELECT, INSERT ON item_passage_refs TO caveat_app;
            END IF;
        END $$;
        """
    )
    op.execute(
        """
        CREATE FUNCTION caveat_item_passage_refs() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO item_passage_refs (tenant_id, ref, item_id)
            SELECT DISTINCT NEW.tenant_id, r, NEW.id
            FROM unnest(NEW.evidence) AS r WHERE r LIKE 'doc:%'
            ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER items_passage_refs AFTER INSERT ON items FOR EACH ROW "
        "EXECUTE FUNCTION caveat_item_passage_refs()"
    )
    op.execute(
        "INSERT INTO item_passage_refs (tenant_id, ref, item_id) "
        "SELECT DISTINCT i.tenant_id, r, i.id FROM items i, unnest(i.evidence) AS r "
        "WHERE r LIKE 'doc:%'"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER items_passage_refs ON items")
    op.execute("DROP FUNCTION caveat_item_passage_refs()")
    op.drop_table("item_passage_refs")
