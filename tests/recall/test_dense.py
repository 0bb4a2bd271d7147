from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

import claims
import lifecycle
from caveat import db
from tests.recall import worlds


@pytest.fixture
def app(db_url: str) -> Iterator[sessionmaker[Session]]:
    eng = db.make_app_engine(db_url)
    yield eng
    eng.dispose()


def test_speed(app) -> None:
    t = time.perf_counter()
    for tenant, n in (("big1", 600), ("big2", 600), ("small", 30)):
        sessions = db.tenant_sessions(app, tenant)
        worlds.setup_tenant(sessions, tenant)
        print("setup", time.perf_counter() - t)
        reqs = [
            claims.ItemWrite.model_validate({
                "kind": "fact", "subject": "payment-api", "attribute": f"seen_{k}", "object": k,
                "evidence": ["E-c1"] if k % 3 else ["E-open"], "scope": {"axis": "case", "id": "INC-1"},
                "text": f"item {k}",
            }) for k in range(n)
        ]
        out = lifecycle.write_batch(sessions=sessions, tenant=tenant, requests=reqs, actor=worlds.WRITER, now=worlds.T0)
        assert all(o.outcome == "accepted" for o in out.outcomes)
        print("write", tenant, time.perf_counter() - t)
        with sessions.begin() as s:
            print(s.execute(sa.text("select count(*) from embed_queue")).scalar(), s.execute(sa.text("select current_user")).scalar())
