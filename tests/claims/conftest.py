"""Fixtures of the claims tests (the shared ones are in tests/conftest.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

import claims
from caveat import db
from tests.conftest import ADMIN, T0, Store

_tenants = itertools.count(1)


@pytest.fixture(scope="module")
def shared_engine(pg_server_url: str, template_db: str) -> Iterator[sa.Engine]:
    """One migrated database for a whole test module (cloning one per test costs ~0.3 s)."""
    with db.with_database(pg_server_url, template=template_db, prefix="caveat_m") as url:
        engine = db.make_engine(url)
        yield engine
        engine.dispose()


def new_tenant_store(engine: sa.Engine) -> Store:
    """A ``Store`` (tenant set up like ``acme``) on a fresh tenant of ``engine``'s database."""
    tenant_store = type("TenantStore", (Store,), {"tenant": f"t{next(_tenants)}"})
    return tenant_store(engine)


@pytest.fixture
def tstore(shared_engine: sa.Engine) -> Store:
    """Like ``store``, on a fresh tenant of a database shared by the module.

    For tests that only touch their own tenant; tests that tamper with a
    table as a whole use ``store``.
    """
    return new_tenant_store(shared_engine)


@pytest.fixture
def admin() -> claims.Actor:
    """The store's operator: writes to any axis, reads every evidence source."""
    return claims.Actor("local-admin", "admin")


@pytest.fixture
def insider(tstore: Store) -> claims.Actor:
    """An agent that may read the restricted payments evidence."""
    with tstore.sessions.begin() as s:
        return claims.register_principal(
            actor=ADMIN,
            session=s,
            tenant=tstore.tenant,
            principal="agent-p",
            role="agent",
            capabilities=["incidents", "payments-restricted"],
        )


@pytest.fixture
def open_case(tstore: Store) -> str:
    """Case INC-1 opened about payment-api (in ``tstore``)."""
    import lifecycle

    with tstore.sessions.begin() as s:
        lifecycle.open_case(
            session=s,
            tenant=tstore.tenant,
            case_id="INC-1",
            subjects=["payment-api"],
            actor=tstore.agent,
            now=T0,
        )
    return "INC-1"
