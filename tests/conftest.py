"""Shared fixtures: a real PostgreSQL for the whole run, fresh databases per test.

With ``DATABASE_URL`` set the tests use that server; otherwise they start an
embedded PostgreSQL in a temporary directory and stop it (and delete the
directory) at the end of the session, leaving no server running.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
import sqlalchemy as sa

import factgen
from caveat import db

#: Who sets up a test's world (tenant, principals, schema, entities, facts): the
#: store's operator, an admin.
ADMIN = factgen.Actor("test-admin", "admin")

# The suite's embedder: deterministic and quick, so CLI subprocesses and scenarios do
# not load torch each time; the tests that run the real model ask for it by name.
os.environ.setdefault("CAVEAT_EMBEDDER", "hashing")


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """SQLAlchemy URL of the test server's ``postgres`` database."""
    with db.temporary_server(os.environ.get("CAVEAT_TEST_DATABASE_URL")) as url:
        yield url


@pytest.fixture(scope="session")
def template_db(pg_server_url: str) -> Iterator[str]:
    """Name of a database migrated to head, to clone per test."""
    name = f"caveat_tpl_{os.getpid()}"
    db.drop_database(pg_server_url, name)
    url = db.create_database(pg_server_url, name)
    db.migrate(url)
    yield name
    db.drop_database(pg_server_url, name)


@pytest.fixture
def db_url(pg_server_url: str, template_db: str) -> Iterator[str]:
    """URL of a fresh migrated database, dropped after the test."""
    with db.with_database(pg_server_url, template=template_db, prefix="caveat_t") as url:
        yield url


@pytest.fixture
def engine(db_url: str) -> Iterator[sa.Engine]:
    """An engine on a fresh migrated database."""
    eng = db.make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture
def pg_dsn(pg_server_url: str) -> Iterator[str]:
    """libpq conninfo of a fresh, empty database (no migrations), for psycopg."""
    with db.with_database(pg_server_url, prefix="caveat_e") as url:
        yield (
            sa.make_url(url)
            .render_as_string(hide_password=False)
            .replace("postgresql+psycopg://", "postgresql://")
        )


@pytest.fixture
def pg_conn(pg_dsn: str) -> Iterator[psycopg.Connection]:
    """An autocommit psycopg connection to a fresh, empty database."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


# --- a small tenant for domain tests -------------------------------------------

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class Store:
    """A migrated database with tenant ``acme`` set up like the pool-max scenario."""

    tenant = "acme"

    def __init__(self, engine: sa.Engine) -> None:
        from sqlalchemy.orm import sessionmaker

        import claims
        import factgen
        from predicates import ValueType

        self.engine = engine
        self.sessions = sessionmaker(engine, expire_on_commit=False)
        with self.sessions.begin() as s:
            factgen.ensure_tenant(actor=ADMIN, session=s, tenant=self.tenant, now=T0)
            self.agent = claims.register_principal(
                actor=ADMIN,
                session=s,
                tenant=self.tenant,
                principal="agent-ir",
                role="agent",
                capabilities=["incidents"],
            )
            self.outsider = claims.register_principal(
                actor=ADMIN,
                session=s,
                tenant=self.tenant,
                principal="agent-x",
                role="agent",
                capabilities=[],
            )
            self.sme = claims.register_principal(
                actor=ADMIN,
                session=s,
                tenant=self.tenant,
                principal="sme-alice",
                role="sme",
                capabilities=["incidents", "payments-restricted"],
            )
            factgen.declare_attributes(
                actor=ADMIN,
                session=s,
                tenant=self.tenant,
                specs=[
                    factgen.AttributeSpec(
                        "config.connection_pool.max",
                        ValueType.parse("int"),
                        content_type="configuration",
                    ),
                    factgen.AttributeSpec(
                        "metrics.pool_utilisation",
                        ValueType.parse("float"),
                        max_age=timedelta(minutes=15),
                    ),
                    factgen.AttributeSpec("env.postgres.version", ValueType.parse("version")),
                    factgen.AttributeSpec("lag_returned_within_s", ValueType.parse("int")),
                ],
            )
            world = factgen.load_world(session=s, tenant=self.tenant)
            factgen.import_entities(
                actor=ADMIN,
                session=s,
                world=world,
                entities=[
                    factgen.EntitySpec(
                        "payment-api",
                        "service",
                        ("payment_api", "paymentapi-prod"),
                        (("depends_on", "payments-db"),),
                    ),
                    factgen.EntitySpec("payments-db", "database"),
                    factgen.EntitySpec("orders-db", "database"),
                ],
            )
            for eid, readers in (("E-1", []), ("E-2", []), ("E-secret", ["payments-restricted"])):
                claims.register_evidence(
                    session=s,
                    tenant=self.tenant,
                    evidence_id=eid,
                    actor=self.sme,
                    now=T0,
                    readers=readers,
                )

    def observe(self, at: object, *obs: tuple[str, str, object]) -> None:
        import factgen

        with self.sessions.begin() as s:
            world = factgen.load_world(session=s, tenant=self.tenant)
            factgen.observe(
                actor=ADMIN,
                session=s,
                world=world,
                observations=[factgen.Observation(a, b, c, "test") for a, b, c in obs],
                observed_at=at,
                now=at,  # type: ignore[arg-type]
            )


@pytest.fixture
def store(engine: sa.Engine) -> Store:
    """A fresh store with tenant ``acme``: schema, entities, principals, evidence."""
    return Store(engine)
