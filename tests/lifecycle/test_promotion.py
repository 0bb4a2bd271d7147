"""Promotion candidates and contested keys across cases (model §4.2)."""

from __future__ import annotations

import lifecycle
from tests.lifecycle.helpers import Life


def test_candidates_and_contested_keys(life: Life) -> None:
    same = {"attribute": "root_cause", "object": "pool exhausted"}
    a = life.write(**same)
    life.open("INC-2")
    b = life.write(case_id="INC-2", **same)
    solo = life.write(case_id="INC-2", attribute="only_here", object="x")
    with life.sessions.begin() as s:
        [cand] = lifecycle.candidates(session=s, tenant=life.tenant, actor=life.store.sme)
        assert lifecycle.contested(session=s, tenant=life.tenant, actor=life.store.sme) == []
    assert (cand.attribute, cand.cases, cand.values) == (
        "root_cause",
        ("INC-1", "INC-2"),
        {"pool exhausted": (a, b)},
    )
    assert solo not in {i.id for i in cand.items}
    assert life.scalar("SELECT count(*) FROM audit_log WHERE action = 'contested'") == 0
    life.open("INC-3")
    c = life.write(case_id="INC-3", attribute="root_cause", object="slow disk")
    with life.sessions.begin() as s:
        assert lifecycle.candidates(session=s, tenant=life.tenant, actor=life.store.sme) == []
        [key] = lifecycle.contested(session=s, tenant=life.tenant, actor=life.store.sme)
        assert lifecycle.is_contested(session=s, tenant=life.tenant, item_id=a)
    assert key.values == {"pool exhausted": (a, b), "slow disk": (c,)}
    detail = life.scalar("SELECT detail FROM audit_log WHERE action = 'contested'")
    assert detail["values"] == {"pool exhausted": [a, b], "slow disk": [c]}
    # a refuted item leaves the key: it is a candidate again
    life.do(lifecycle.refute, item_id=c, reason="disk was fine", actor=life.store.sme)
    with life.sessions.begin() as s:
        assert len(lifecycle.candidates(session=s, tenant=life.tenant, actor=life.store.sme)) == 1
