"""Migration 0028: the items citing a passage, kept by a trigger and backfilled."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command

import claims
import recall
from caveat import app as use
from caveat import db
from tests.caveat._doors import world
from tests.caveat.test_isolation import cites_runbook
from tests.conftest import ADMIN

_REFS = "SELECT tenant_id, ref, item_id FROM item_passage_refs ORDER BY 1, 2, 3"
_CITING = (
    "SELECT i.tenant_id, r, i.id FROM items i, unnest(i.evidence) AS r "
    "WHERE r LIKE 'doc:%' ORDER BY 1, 2, 3"
)


def test_0028_keeps_every_citation_of_a_passage_and_backfills_them(pg_server_url: str) -> None:
    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        db.migrate(url)
        app_engine = db.make_app_engine(url)
        try:
            rt = use.Runtime.over(app_engine, "acme", embedder=recall.HashingEmbedder())
            world(rt)
            use.open_case(rt, ADMIN, "INC-9", subjects=["payment-api"])
            runbook = claims.DocumentInput("db/failover.md", "# Failover\n\nPromote it.\n")
            use.docs_import(rt, ADMIN, [runbook])
            cites_runbook(rt)
        finally:
            app_engine.dispose()
        owner = db.make_engine(url)
        try:
            with owner.connect() as c:
                written = c.execute(sa.text(_REFS)).all()
                citing = c.execute(sa.text(_CITING)).all()
            assert written == citing and len(written) == 1  # by the trigger, at the write
            assert written[0][1] == "doc:db/failover.md#failover"
            command.downgrade(db.alembic_config(url), "0027")
            with owner.connect() as c:
                assert not sa.inspect(c).has_table("item_passage_refs")
            db.migrate(url)
            with owner.connect() as c:
                assert c.execute(sa.text(_REFS)).all() == written  # by the backfill
        finally:
            owner.dispose()
