"""Promotion candidates and contested keys across cases (model §4.2)."""

from __future__ import annotations

import claims
import lifecycle
from tests.lifecycle.helpers import Life


def test_candidates_and_contested_keys(life: Life) -> None:
    same = {"attribute": "root_cause", "object": "pool exhausted"}
    a = life.write(**same)
    life.open("INC-2")
    b = life.write(case_id="INC-2", **same)
    solo = life.write(case_id="INC-2", attribute="only_here", object="x")
    with life.sessions.begin() as s:
        [cand] = lifecycle.candidates(
            session=s, tenant=life.tenant, actor=life.store.sme, min_subjects=2
        )
        assert lifecycle.contested(session=s, tenant=life.tenant, actor=life.store.sme) == []
    assert (cand.attribute, cand.cases, cand.values) == (
        "root_cause",
        ("INC-1", "INC-2"),
        {'"pool exhausted"': (a, b)},
    )
    assert solo not in {i.id for i in cand.items}
    assert life.scalar("SELECT count(*) FROM audit_log WHERE action = 'contested'") == 0
    life.open("INC-3")
    c = life.write(case_id="INC-3", attribute="root_cause", object="slow disk")
    with life.sessions.begin() as s:
        assert (
            lifecycle.candidates(
                session=s, tenant=life.tenant, actor=life.store.sme, min_subjects=2
            )
            == []
        )
        [key] = lifecycle.contested(session=s, tenant=life.tenant, actor=life.store.sme)
        assert lifecycle.is_contested(session=s, tenant=life.tenant, item_id=a)
    assert key.values == {'"pool exhausted"': (a, b), '"slow disk"': (c,)}
    detail = life.scalar("SELECT detail FROM audit_log WHERE action = 'contested'")
    assert detail["values"] == {'"pool exhausted"': [a, b], '"slow disk"': [c]}
    # a refuted item leaves the key: it is a candidate again
    life.do(lifecycle.refute, item_id=c, reason="disk was fine", actor=life.store.sme)
    with life.sessions.begin() as s:
        assert (
            len(
                lifecycle.candidates(
                    session=s, tenant=life.tenant, actor=life.store.sme, min_subjects=2
                )
            )
            == 1
        )


def test_batch_writes_check_cases_and_log_contested_keys(life: Life) -> None:
    life.open("INC-2")
    life.open("INC-3")
    with life.sessions.begin() as s:
        lifecycle.close_case(
            session=s,
            tenant=life.tenant,
            case_id="INC-3",
            outcome="confirmed",
            actor=life.store.agent,
            now=life.now,
        )

    def request(case_id: str, obj: str) -> claims.ItemWrite:
        return claims.ItemWrite.model_validate(
            {
                "kind": "fact",
                "subject": "payment-api",
                "attribute": "root_cause",
                "object": obj,
                "required": ["config.connection_pool.max eq 20"],
                "evidence": ["E-1"],
                "scope": {"axis": "case", "id": case_id},
            }
        )

    result = lifecycle.write_batch(
        sessions=life.sessions,
        tenant=life.tenant,
        requests=[
            request("INC-1", "pool exhausted"),
            request("INC-2", "slow disk"),
            request("INC-3", "too late"),
        ],
        actor=life.store.agent,
        now=life.now,
    )
    assert [o.outcome for o in result.outcomes] == ["accepted", "accepted", "rejected"]
    assert result.outcomes[2].code == "case_not_open"
    assert life.scalar("SELECT count(*) FROM audit_log WHERE action = 'contested'") == 1


def test_consolidated_proposals_log_contested_keys(life: Life) -> None:
    life.open("INC-2")

    def proposal(obj: str) -> dict[str, object]:
        return {
            "kind": "fact",
            "subject": "payment-api",
            "attribute": "latency_cause",
            "object": obj,
            "required": ["config.connection_pool.max eq 20"],
            "excluded": [],
            "evidence": ["E-1"],
            "derived_from": [],
            "epistemic": "hypothesis",
            "content_type": None,
            "text": None,
            "entities": [],
            "purposes": [],
            "salience": None,
            "valid_from": None,
            "valid_to": None,
            "version": None,
            "test": None,
            "rationale": "recorded",
        }

    for case_id, obj in (("INC-1", "pool too small"), ("INC-2", "slow disk")):
        result = lifecycle.consolidate(
            [proposal(obj)],
            sessions=life.sessions,
            tenant=life.tenant,
            actor=life.store.agent,
            scope=claims.Anchor(axis="case", id=case_id),
            now=life.now,
        )
        assert [o.outcome for o in result.outcomes] == ["accepted"]
    assert life.scalar("SELECT count(*) FROM audit_log WHERE action = 'contested'") == 1
