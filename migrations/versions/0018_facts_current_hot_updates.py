"""facts_current updated in place: room on its pages for HOT updates

A pull stores one fact per (subject, attribute) it answers, so the statement trigger
of ``facts`` (0008, 0017) updates every one of those rows of ``facts_current`` at
every pull. On pages filled to the brim (fillfactor 100) each update put the new row
version on another page and inserted a new entry into the primary key: with half
of each page left free, the new version stays on its page and the index is not
touched (a heap-only tuple update; the key columns never change). The versions a
committed pull left behind are pruned when a page is next visited, so the room is
there again at the next pull. What is stored, and the trigger, are unchanged.

``facts_current`` is one row per (tenant, subject, attribute), so doubling its
size is small; ``facts``, the history, is append-only and keeps fillfactor 100.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The share of each page of ``facts_current`` filled by inserts (percent).
FILLFACTOR = 50


def upgrade() -> None:
    # new pages are filled to FILLFACTOR; the rows already there keep their pages
    # until they are updated (an update moves a row off a full page once)
    op.execute(f"ALTER TABLE facts_current SET (fillfactor = {FILLFACTOR})")


def downgrade() -> None:
    op.execute("ALTER TABLE facts_current RESET (fillfactor)")
