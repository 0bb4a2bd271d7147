"""The fuzz tests' one query: how many rows each data table holds (as the owner)."""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["row_counts"]

#: Tables a refused input may still write to: rejections are audited (model §3.2).
AUDITED = frozenset({"audit_log", "alembic_version"})

_TABLES = sa.text(
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY c.relname"
)


def row_counts(engine: sa.Engine) -> dict[str, int]:
    """Rows per table of the public schema, every tenant, except the audit log."""
    with engine.connect() as conn:
        names = [n for n in conn.execute(_TABLES).scalars() if n not in AUDITED]
        union = " UNION ALL ".join(
            f"SELECT '{n}' AS t, count(*) AS n FROM public.\"{n}\"" for n in names
        )
        return {t: int(n) for t, n in conn.execute(sa.text(union))}
