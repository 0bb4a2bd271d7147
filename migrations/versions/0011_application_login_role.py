"""the application connects as its own login role; row-level security forced everywhere

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02

- ``caveat_app`` (created NOLOGIN by 0003, so NOSUPERUSER, NOBYPASSRLS,
  NOCREATEROLE and NOCREATEDB by default) becomes the application's **login
  role**: LOGIN only, which a CREATEROLE owner that is not a superuser may grant
  (naming the other attributes would need a superuser; the application checks
  them at start-up instead, ``caveat.db.make_app_engine``). The application connects as it (``caveat.db.make_app_engine``)
  instead of connecting as the owner and setting ``role``: a session that
  logged in as ``caveat_app`` cannot ``RESET ROLE`` back to the owner, and it is
  a member of no role that bypasses row-level security.
- Every table with a ``tenant_isolation`` policy has row-level security
  *forced* as well as enabled, so a table owner that is not a superuser is
  bound by the policies too (superusers, such as the embedded server's
  ``postgres``, bypass row-level security whatever the table says).

On a server where the migrating user may not alter roles the role change is
skipped with a notice; the application then refuses to start as that role
unless told to run as the connecting user (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APP_ROLE = "caveat_app"

_POLICY_TABLES = """
SELECT DISTINCT tablename FROM pg_policies
WHERE schemaname = 'public' AND policyname = 'tenant_isolation'
"""


def _role(attributes: str) -> str:
    return f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        BEGIN
            EXECUTE 'ALTER ROLE {APP_ROLE} {attributes}';
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'cannot alter role {APP_ROLE}: left as it was';
        END;
    END IF;
END $$;
"""


def _force(verb: str) -> str:
    return f"""
DO $$
DECLARE t text;
BEGIN
    FOR t IN {_POLICY_TABLES} LOOP
        EXECUTE format('ALTER TABLE %I {verb} ROW LEVEL SECURITY', t);
    END LOOP;
END $$;
"""


def upgrade() -> None:
    op.execute(_role("LOGIN"))
    op.execute(_force("FORCE"))


def downgrade() -> None:
    op.execute(_force("NO FORCE"))
    op.execute("ALTER TABLE facts_current FORCE ROW LEVEL SECURITY")  # as 0008 left it
    op.execute(_role("NOLOGIN"))
