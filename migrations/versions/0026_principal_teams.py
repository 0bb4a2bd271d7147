"""Principals may belong to a team

Revision ID: 0026
Revises: 0023
Create Date: 2026-12-03

model §6, "Anchors from the context": a recall's default anchor set holds the caller's
team (``team:<id>``) when its principal has one. ``principals.team`` is that team
(NULL: none); ``caveat token create --team`` and ``POST /v1/tokens`` set it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("principals", sa.Column("team", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("principals", "team")
