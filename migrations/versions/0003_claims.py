"""claims: skills' tests and release, and the application role

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02

- ``evidence.test_outcome``: a test run of a skill (``passed`` / ``failed``).
- ``items.test_evidence``: the passing run a skill cites.
- ``uq_items_released_skill``: at most one released version per skill.
- ``items.key_digest`` (generated: md5 of the tenant and the supersession
  key) and ``ix_items_current_digest``: the write path finds the current rows
  of a batch's keys by one index probe each, whatever the statistics say
  (``uq_items_current_key`` still enforces the key).
- The application role ``caveat_app`` (NOLOGIN; the application connects as a
  member, or as a login role granted it, and ``SET ROLE``s): it may read and
  write every table but may only INSERT into and SELECT from ``audit_log``;
  UPDATE, DELETE and TRUNCATE there are not granted, so the database refuses
  them by privilege, before the append-only trigger of 0001 is reached.
  Default privileges give tables created later by the migrating role the same
  grants. A migrating role without CREATEROLE skips the role with a notice
  (the trigger still refuses tampering).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APP_ROLE = "caveat_app"

GRANTS = f"""
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        BEGIN
            CREATE ROLE {APP_ROLE} NOLOGIN;
        EXCEPTION
            WHEN duplicate_object THEN NULL;
            WHEN insufficient_privilege THEN
                RAISE NOTICE 'cannot create role {APP_ROLE}: grants skipped';
                RETURN;
        END;
    END IF;
    EXECUTE 'GRANT USAGE ON SCHEMA public TO {APP_ROLE}';
    EXECUTE 'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {APP_ROLE}';
    EXECUTE 'GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {APP_ROLE}';
    EXECUTE 'GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO {APP_ROLE}';
    EXECUTE 'REVOKE UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON audit_log FROM {APP_ROLE}';
    EXECUTE 'ALTER DEFAULT PRIVILEGES IN SCHEMA public '
            'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {APP_ROLE}';
    EXECUTE 'ALTER DEFAULT PRIVILEGES IN SCHEMA public '
            'GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {APP_ROLE}';
END $$;
"""

REVOKES = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        EXECUTE 'ALTER DEFAULT PRIVILEGES IN SCHEMA public '
                'REVOKE ALL ON TABLES FROM {APP_ROLE}';
        EXECUTE 'ALTER DEFAULT PRIVILEGES IN SCHEMA public '
                'REVOKE ALL ON SEQUENCES FROM {APP_ROLE}';
        EXECUTE 'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {APP_ROLE}';
        EXECUTE 'REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {APP_ROLE}';
        EXECUTE 'REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM {APP_ROLE}';
        EXECUTE 'REVOKE USAGE ON SCHEMA public FROM {APP_ROLE}';
    END IF;
END $$;
"""


def upgrade() -> None:
    op.add_column("evidence", sa.Column("test_outcome", sa.String(), nullable=True))
    op.add_column("items", sa.Column("test_evidence", sa.String(), nullable=True))
    op.add_column(
        "items",
        sa.Column(
            "key_digest",
            sa.String(),
            sa.Computed(
                "md5(tenant_id || chr(31) || scope_axis || chr(31) || scope_id || chr(31) || subject || chr(31) || attribute || chr(31) || kind || chr(31) || cond_key || chr(31) || evidence_key)",
                persisted=True,
            ),
            nullable=True,
        ),
    )
    op.create_index(
        "ix_items_current_digest",
        "items",
        ["key_digest"],
        unique=False,
        postgresql_where=sa.text("superseded_at IS NULL"),
    )
    op.create_index(
        "uq_items_released_skill",
        "items",
        ["tenant_id", "scope_axis", "scope_id", "subject", "attribute", "cond_key"],
        unique=True,
        postgresql_where=sa.text(
            "kind = 'skill' AND release_state = 'released' AND superseded_at IS NULL"
        ),
    )
    op.execute(GRANTS)


def downgrade() -> None:
    # The role is cluster-wide (other databases may use it): only this database's
    # grants are taken back.
    op.execute(REVOKES)
    op.drop_index(
        "uq_items_released_skill",
        table_name="items",
        postgresql_where=sa.text(
            "kind = 'skill' AND release_state = 'released' AND superseded_at IS NULL"
        ),
    )
    op.drop_index(
        "ix_items_current_digest",
        table_name="items",
        postgresql_where=sa.text("superseded_at IS NULL"),
    )
    op.drop_column("items", "key_digest")
    op.drop_column("items", "test_evidence")
    op.drop_column("evidence", "test_outcome")
