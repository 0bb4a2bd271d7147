"""The tenant in every key: items, item_states, facts, events and erasures

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02

Every other tenant table already had ``tenant_id`` first in its primary key.
These five had a key of their own (a global identity or the item id): their
primary keys become ``(tenant_id, id)`` (``item_states``: ``(tenant_id,
item_id)``), which both isolation (a key never collides across tenants, so a
collision says nothing about another tenant) and a distribution by tenant
(docs/scaling.md: Citus needs the distribution column in every primary and
unique key) need. Ids stay globally unique (one identity sequence each), so no
row changes; only the constraints and their indexes are rebuilt.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: table -> (its key before, its key now)
_KEYS = {
    "items": ("id", "tenant_id, id"),
    "item_states": ("item_id", "tenant_id, item_id"),
    "facts": ("id", "tenant_id, id"),
    "events": ("id", "tenant_id, id"),
    "erasures": ("id", "tenant_id, id"),
}


def _rekey(table: str, columns: str) -> None:
    op.execute(
        f"ALTER TABLE {table} DROP CONSTRAINT {table}_pkey, "
        f"ADD CONSTRAINT {table}_pkey PRIMARY KEY ({columns})"
    )


def upgrade() -> None:
    for table, (_, now) in _KEYS.items():
        _rekey(table, now)


def downgrade() -> None:
    for table, (before, _) in _KEYS.items():
        _rekey(table, before)
