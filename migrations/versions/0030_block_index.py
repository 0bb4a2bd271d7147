"""Core blocks found by an index of their own

model §4 "Core blocks": every live recall packs the blocks in play first
(``claims._queries.current_blocks``: the tenant's, the caller's teams', its agent
anchor's). Blocks are items of kind ``block``, and no index led with what that lookup
asks: the nearest, ``uq_items_current_key``, has ``kind`` in sixth place, so the lookup
read the tenant's whole stretch of it, 1,465 pages and 5.5 ms warm at 50,000 items
(28 ms cold), on every recall, for a tenant with no block at all.

``ix_items_current_blocks`` holds only current blocks (partial: ``kind = 'block'`` and
not superseded), keyed by tenant, anchor and label: a recall's lookup is a few index
probes. Equality on text is leakproof, so the planner uses it under row-level security.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_items_current_blocks",
        "items",
        ["tenant_id", "scope_axis", "scope_id", "attribute"],
        postgresql_where=sa.text("kind = 'block' AND superseded_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_items_current_blocks", table_name="items")
