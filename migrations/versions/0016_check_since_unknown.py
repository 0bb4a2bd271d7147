"""A pending check's condition on an attribute observed before its instant is UNKNOWN

The verify-on-next-use check (model §4.3) counts only observations made at or after
the instant that put the item there. An attribute last observed before it was read
as having no observation, which ``exists`` answers FALSE: an item excluding
``X exists`` then passed its check on an observation that said the opposite. It was
observed, just not since: ``caveat_observed`` now answers ``{"before_since": true}``
there, an observation of no type, which ``caveat_eval`` answers UNKNOWN for every
operator, ``exists`` included. Recall's plain-SQL twin (``recall._queries``) and the
Python check (``lifecycle.check_item``) answer the same; tests/recall/test_read.py
holds the three together.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-03
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_0008 = importlib.import_module("migrations.versions.0008_recall_at_scale")
_BEFORE = """    IF p_since IS NOT NULL AND o < p_since THEN
        RETURN NULL;
    END IF;"""
_AFTER = """    IF p_since IS NOT NULL AND o < p_since THEN
        RETURN '{"before_since": true}'::jsonb;  -- observed, not since: UNKNOWN
    END IF;"""


def upgrade() -> None:
    functions: str = _0008.FUNCTIONS
    if _BEFORE not in functions:
        raise RuntimeError("migration 0008's caveat_observed is not the one 0016 replaces")
    op.execute(functions.replace(_BEFORE, _AFTER))


def downgrade() -> None:
    op.execute(_0008.FUNCTIONS)  # 0008's bodies, as they were
