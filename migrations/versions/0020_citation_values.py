"""citations carry what a rule or skill expected, what was observed, and why

Issue 25 (docs/lifecycle.md, "Cases, citations and demotion"):

- ``citations.expected`` and ``citations.observed`` (jsonb, null when not given): the
  value a skill (a rule is filed as a skill, model §1.3) prescribes and the value the
  agent observed or did; when both are given the citation's compliance is derived
  from them (equal: followed) instead of from the influence alone.
- ``citations.rationale`` (text, null when not given): the agent's reason.
- ``ix_citations_cited``: ``(tenant_id, cited_at, case_id, item_id)``, the keyset order
  of ``caveat citations list`` / ``GET /v1/citations``, so a page reads only its rows.
- ``skill_enforcement.reason``: why an SME set the level (also in its audit row),
  shown in the dossier beside the level.

No new table: both tables keep their row-level security and grants (0006, 0011).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("citations", sa.Column("expected", JSONB(), nullable=True))
    op.add_column("citations", sa.Column("observed", JSONB(), nullable=True))
    op.add_column("citations", sa.Column("rationale", sa.String(), nullable=True))
    op.create_index(
        "ix_citations_cited", "citations", ["tenant_id", "cited_at", "case_id", "item_id"]
    )
    op.add_column("skill_enforcement", sa.Column("reason", sa.String(), nullable=True))


def downgrade() -> None:
    op.drop_column("skill_enforcement", "reason")
    op.drop_index("ix_citations_cited", table_name="citations")
    op.drop_column("citations", "rationale")
    op.drop_column("citations", "observed")
    op.drop_column("citations", "expected")
