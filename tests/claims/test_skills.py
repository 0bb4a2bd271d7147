"""Skills: versions, a passing test to release, one released version, recalled alone."""

from __future__ import annotations

from typing import Any

import pytest

import claims
import lifecycle
import recall
from predicates.errors import CaveatError, Forbidden, IllegalTransition
from tests.claims._support import evidence, rows, write
from tests.conftest import T0, Store

PROC = "drain one pod, restart its pool, watch p99 for two minutes, repeat"


def skill(store: Store, **changes: Any) -> claims.WriteResult:
    return write(
        store,
        **{"kind": "skill", "attribute": "pool_restart_procedure", "object": PROC, **changes},
    )


def release(store: Store, item_id: int, actor: claims.Actor | None = None, **kw: Any) -> Any:
    with store.sessions.begin() as s:
        return claims.release_skill(
            session=s,
            tenant=store.tenant,
            item_id=item_id,
            actor=actor or store.sme,
            now=T0,
            **kw,
        )


def release_states(store: Store) -> list[tuple[int, str]]:
    return [
        tuple(r)  # type: ignore[misc]
        for r in rows(
            store,
            "SELECT version, release_state FROM items WHERE tenant_id = :t AND kind = 'skill' "
            "ORDER BY version",
        )
    ]


def test_versions_are_rows_of_their_own_and_start_as_drafts(tstore: Store) -> None:
    v1 = skill(tstore)
    v2 = skill(tstore, object=PROC + ", then page the DBA")
    explicit = skill(tstore, version=7, object="something else entirely")
    assert v2.superseded is None and v1.item_id != v2.item_id
    assert release_states(tstore) == [(1, "draft"), (2, "draft"), (7, "draft")]
    assert skill(tstore).outcome == "accepted"  # v1's object again is new as v8
    assert skill(tstore, version=7, object="something else entirely").item_id == explicit.item_id


def test_a_draft_version_may_change_in_place_of_itself(tstore: Store) -> None:
    first = skill(tstore, version=1)
    fixed = skill(tstore, version=1, object=PROC + " (fixed typo)")
    assert fixed.superseded == first.item_id


def test_release_needs_a_passing_test(tstore: Store) -> None:
    evidence(tstore, "T-fail", test_outcome="failed")
    evidence(tstore, "T-pass", test_outcome="passed")
    evidence(tstore, "T-secret", test_outcome="passed", readers=["payments-restricted"])
    v1 = skill(tstore)
    for test in (None, "T-fail", "T-404", "E-1", "T-secret"):
        with pytest.raises(claims.SkillTestRequired) as err:
            release(tstore, v1.item_id, test=test)
        assert err.value.code == "skill_test_required"
    with pytest.raises(Forbidden):
        release(tstore, v1.item_id, actor=tstore.agent, test="T-pass")
    item = release(tstore, v1.item_id, test="T-pass")
    assert (item.release_state, item.test_evidence) == ("released", "T-pass")
    [audit] = rows(
        tstore, "SELECT code, detail FROM audit_log WHERE tenant_id = :t AND action = 'release'"
    )
    assert audit.code == "released" and audit.detail["test"] == "T-pass"


def test_a_test_cited_at_write_time_is_enough(tstore: Store) -> None:
    evidence(tstore, "T-pass", test_outcome="passed")
    v1 = skill(tstore, test="T-pass")
    assert release(tstore, v1.item_id).test_evidence == "T-pass"


def test_releasing_a_version_retires_the_one_before(tstore: Store) -> None:
    evidence(tstore, "T-pass", test_outcome="passed")
    v1 = skill(tstore, test="T-pass")
    v2 = skill(tstore, test="T-pass", object=PROC + " slowly")
    release(tstore, v1.item_id)
    release(tstore, v2.item_id)
    assert release_states(tstore) == [(1, "retired"), (2, "released")]
    # a released or retired version is frozen: a change is a new version
    with pytest.raises(CaveatError) as err:
        skill(tstore, version=2, object="anything else")
    assert err.value.code == "skill_version_frozen"
    # rolling back: re-releasing v1 retires v2
    release(tstore, v1.item_id)
    assert release_states(tstore) == [(1, "released"), (2, "retired")]
    with pytest.raises(IllegalTransition):
        release(tstore, v1.item_id)
    with tstore.sessions.begin() as s:
        claims.retire_skill(
            session=s, tenant=tstore.tenant, item_id=v1.item_id, actor=tstore.sme, now=T0
        )
    assert release_states(tstore) == [(1, "retired"), (2, "retired")]


def test_only_skills_are_released(tstore: Store) -> None:
    fact = write(tstore)
    with pytest.raises(IllegalTransition):
        release(tstore, fact.item_id, test="E-1")


def test_the_database_allows_one_released_version(tstore: Store) -> None:
    import sqlalchemy as sa

    evidence(tstore, "T-pass", test_outcome="passed")
    v1 = skill(tstore, test="T-pass")
    v2 = skill(tstore, test="T-pass", object=PROC + " slowly")
    release(tstore, v1.item_id)
    with pytest.raises(sa.exc.IntegrityError), tstore.engine.begin() as c:
        c.execute(
            sa.text("UPDATE items SET release_state = 'released' WHERE id = :i"),
            {"i": v2.item_id},
        )


def test_only_the_released_version_is_recalled(tstore: Store) -> None:
    evidence(tstore, "T-pass", test_outcome="passed")
    with tstore.sessions.begin() as s:
        lifecycle.open_case(
            session=s,
            tenant=tstore.tenant,
            case_id="INC-1",
            subjects=["payment-api"],
            actor=tstore.agent,
            now=T0,
        )
    v1 = skill(tstore, test="T-pass", required=[])
    v2 = skill(tstore, test="T-pass", required=[], object=PROC + " slowly")

    def recalled() -> list[int]:
        with tstore.sessions.begin() as s:
            result = recall.recall(
                session=s,
                tenant=tstore.tenant,
                actor=tstore.agent,
                request=recall.RecallRequest(
                    query="pool restart procedure", case_id="INC-1", subjects=["payment-api"]
                ),
                now=T0,
            )
        return [r.item.id for r in result.items if r.item.kind == "skill"]

    assert recalled() == []  # drafts are never recalled
    release(tstore, v1.item_id)
    assert recalled() == [v1.item_id]
    release(tstore, v2.item_id)
    assert recalled() == [v2.item_id]
