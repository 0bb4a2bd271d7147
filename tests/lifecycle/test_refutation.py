"""Refutation reaches the lineage like revocation (model §4.4): the refuted item leaves
retrieval and every context, its descendants are re-opened, a rollup built on a
withdrawn episode is re-opened, and a withdrawn item's vector is never a dense
candidate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import claims
import lifecycle
import recall
from claims._queries import TRANSITIONS
from predicates.errors import GateRejection, InputError
from recall import _recall as recall_module
from recall._embed import vector_text
from tests.lifecycle.helpers import Life, ids, withheld


def _refute(life: Life, item_id: int, reason: str = "the dashboard was wrong") -> Any:
    return life.do(lifecycle.refute, item_id=item_id, reason=reason, actor=life.store.sme)


def test_refute_reopens_the_whole_lineage_like_a_revocation(life: Life) -> None:
    life.hot()
    root = life.write()
    children = [life.write(derived_from=[root], evidence=["E-2"], object="E-2") for _ in range(2)]
    grand = life.write(derived_from=[children[0], children[1]])
    life.activate(root, children[0], grand)
    revoked = life.write(derived_from=[root])
    refuted = life.write(derived_from=[root])
    life.do(lifecycle.revoke, item_id=revoked, reason="wrong", actor=life.store.sme)
    _refute(life, refuted)
    assert life.guard([root, *children, grand], "INC-1").dropped == {}  # all usable before
    item = _refute(life, root)
    assert item.state == "refuted"
    assert life.states(root, revoked, refuted) == ["refuted", "revoked", "refuted"]
    assert set(life.states(*children, grand)) == {"needs_reverification"}
    # one transition audit row per moved item, naming the refuted ancestor
    for child in (*children, grand):
        [detail] = life.scalar(
            "SELECT array_agg(detail) FROM (SELECT detail FROM audit_log WHERE item_id = :i "
            "AND action = 'transition' ORDER BY seq DESC LIMIT 1) a",
            i=child,
        )
        assert detail["cause"] == {"refuted": root}
        reason = detail["reason"]
        assert reason == f"ancestor {root} refuted: the dashboard was wrong"
    assert life.history_holds() and life.audit_ok()
    # the refuted item and its re-opened lineage leave every context and retrieval
    guard = life.guard([root, *children, grand], "INC-1")
    assert guard.usable == ()
    assert guard.dropped == {
        root: "refuted",
        children[0]: "needs_reverification",
        children[1]: "needs_reverification",
        grand: "needs_reverification",
    }
    res = life.recall("INC-1", record=False)
    assert not {root, *children, grand} & set(ids(res))
    assert withheld(res)[root] == "activated_version"
    with life.sessions.begin() as s:
        graph = lifecycle.lineage(
            session=s, tenant=life.tenant, item_id=grand, actor=life.store.sme
        )
    assert {(n.id, n.state) for n in graph.ancestors} == {
        (root, "refuted"),
        (children[0], "needs_reverification"),
        (children[1], "needs_reverification"),
    }
    # and nothing new is built on it, directly or through a re-opened descendant
    for parent in (root, grand):
        with pytest.raises(GateRejection) as err:
            life.write(derived_from=[parent])
        assert err.value.code == "lineage_refuted"


def test_the_refute_preview_lists_what_it_reopens(life: Life) -> None:
    root = life.write()
    child = life.write(derived_from=[root])
    with life.sessions.begin() as s:
        preview = lifecycle.preview_action(
            session=s, tenant=life.tenant, actor=life.store.sme, item_id=root, action="refute"
        )
    assert preview.to_state == "refuted"
    assert [n.id for n in preview.reopens] == [child]
    assert any("lineage_refuted" in e for e in preview.effects), preview.effects
    assert "1 descendant(s) you can read go to needs_reverification" in preview.effects


def _rollup(life: Life) -> tuple[int, tuple[int, ...]]:
    with life.sessions.begin() as s:
        claims.register_evidence(
            session=s, tenant=life.tenant, evidence_id="E-3", actor=life.store.sme, now=life.now
        )
    for n, ev in enumerate(["E-1", "E-2", "E-3"]):
        life.write(
            kind="episode",
            attribute="trace",
            object=ev,
            evidence=[ev],
            text=f"Pool exhausted on payment-api, restart restored service {n}",
        )
    life.close("INC-1")
    [roll] = lifecycle.rollup(
        sessions=life.sessions, tenant=life.tenant, actor=life.store.agent, now=life.now
    )
    assert roll.item_id is not None
    return roll.item_id, roll.episodes


@pytest.mark.parametrize("how", ["refute", "revoke"])
def test_a_rollup_whose_source_is_withdrawn_is_reopened(life: Life, how: str) -> None:
    """A rollup is derived from its episodes (``derived_from``): withdrawing one episode,
    archived since it was rolled up, re-opens the rollup, and nothing new is built on it."""
    roll, episodes = _rollup(life)
    assert life.state(roll) == "case" and set(life.states(*episodes)) == {"archived"}
    action = lifecycle.refute if how == "refute" else lifecycle.revoke
    life.do(action, item_id=episodes[1], reason="not what happened", actor=life.store.sme)
    assert life.state(episodes[1]) == f"{how}d"
    assert life.state(roll) == "needs_reverification"
    assert life.states(episodes[0], episodes[2]) == ["archived", "archived"]
    cause = life.scalar(
        f"SELECT cause FROM {TRANSITIONS} h WHERE item_id = :i ORDER BY seq DESC LIMIT 1", i=roll
    )
    assert cause == {f"{how}d": episodes[1]}
    assert life.history_holds() and life.audit_ok()


class _Fixed:
    """An embedder whose every text is one fixed query vector (the items' vectors are
    stored by the test): the dense channel's order is the test's to choose."""

    name = "fixed-8"
    dimension = 8

    def __init__(self, query: Sequence[float]) -> None:
        self.query = np.array(query, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.query for _ in texts])


@pytest.mark.parametrize("how", ["refute", "revoke", "redact"])
def test_a_withdrawn_items_vector_is_never_a_dense_candidate(
    life: Life, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nearest vector to the query belongs to a withdrawn item: it must not take the
    dense channel's place (``DENSE_K`` lowered to 1), so the next nearest item still gets
    its dense term and ranks first (redaction was already filtered; revocation and
    refutation are pinned here)."""
    life.hot()
    gone, near, far = (life.write(text=t) for t in ("alpha one", "bravo two", "charlie three"))
    life.activate(gone, near, far)
    vectors = {gone: [1, 0, 0, 0, 0, 0, 0, 0], near: [0.8, 0.6, 0, 0, 0, 0, 0, 0]}
    vectors[far] = [0, 0, 0, 0, 0, 0, 0, 1]
    with life.engine.begin() as c:
        for item_id, v in vectors.items():
            c.exec_driver_sql(
                "INSERT INTO item_embeddings (tenant_id, item_id, model, dim, embedding, "
                "embedded_at) VALUES (%s, %s, %s, 8, CAST(%s AS vector), %s)",
                (life.tenant, item_id, _Fixed.name, vector_text(v), life.now),
            )
    if how == "redact":
        life.do(lifecycle.redact, item_id=gone, reason="pii", actor=life.store.sme)
    else:
        action = lifecycle.refute if how == "refute" else lifecycle.revoke
        life.do(action, item_id=gone, reason="shown false", actor=life.store.sme)
    monkeypatch.setattr(recall_module, "DENSE_K", 1)
    nearest: list[list[int]] = []
    plan = recall_module._dense_candidates

    def spy(*args: Any) -> tuple[list[int], str | None]:
        found = plan(*args)
        nearest.append(found[0])
        return found

    monkeypatch.setattr(recall_module, "_dense_candidates", spy)
    request = recall.RecallRequest(query="zulu", case_id="INC-1", explain=True, limit=3)
    with life.sessions.begin() as s:
        res = recall.recall(
            session=s,
            tenant=life.tenant,
            actor=life.store.agent,
            request=request,
            now=life.now,
            embedder=_Fixed([1, 0, 0, 0, 0, 0, 0, 0]),
        )
    assert res.dense_search == "exact" and nearest == [[near]]
    assert ids(res) == [near, far]  # the dense term ranks it, not recency alone
    scored = {r.item.id for r in res.items if not math.isnan(r.parts["dense"])}
    assert scored == {near}
    # the recency stage still walks past it: explain names it withheld for its state
    # (a redacted item is never mentioned at all)
    if how == "redact":
        assert gone not in withheld(res)
    else:
        assert withheld(res)[gone] == "activated_version"
    # with subjects every candidate is scored by key: the withdrawn one is ranked apart,
    # so the live nearest still has the first rank of every channel
    by_subject = recall.RecallRequest(
        query="alpha bravo", subjects=["payment-api"], case_id="INC-1", explain=True, limit=3
    )
    with life.sessions.begin() as s:
        res = recall.recall(
            session=s,
            tenant=life.tenant,
            actor=life.store.agent,
            request=by_subject,
            now=life.now,
            embedder=_Fixed([1, 0, 0, 0, 0, 0, 0, 0]),
        )
    [first] = [r for r in res.items if r.item.id == near]
    assert first.parts["dense_rank"] == 1 and first.parts["lexical_rank"] == 1, first.parts


def test_a_reopening_names_no_refuted_ancestor_the_reader_may_not_read(life: Life) -> None:
    """As for a revocation: a reader who may not read the refuted ancestor is told that
    an ancestor was refuted, not which."""
    from caveat import app as use
    from tests.conftest import ADMIN

    insider = claims.Actor("agent-p", "agent", frozenset({"incidents", "payments-restricted"}))
    secret = life.write(actor=insider, evidence=["E-secret"], object="E-secret")
    child = life.write(actor=insider, derived_from=[secret])
    _refute(life, secret)
    with life.sessions.begin() as s:
        plain = claims.register_principal(
            actor=ADMIN,
            session=s,
            tenant=life.tenant,
            principal="sme-plain",
            role="sme",
            capabilities=["incidents"],
        )
    rt = use.Runtime.over(life.engine, life.tenant)

    def reopening(reader: claims.Actor) -> dict[str, Any]:
        [row] = [
            r
            for r in use.audit_entries(rt, reader, item_id=child, action="transition")
            if r.detail.get("to") == "needs_reverification"
        ]
        return row.detail

    told = reopening(life.store.sme)
    assert told["cause"] == {"refuted": secret} and str(secret) in told["reason"]
    seen = reopening(plain)
    assert (seen["reason"], seen["cause"]) == ("an ancestor was refuted", {})


def test_a_refutation_needs_a_reason(life: Life) -> None:
    """As a revocation does: a blank reason is refused and nothing moves."""
    item = life.write()
    life.activate(item)
    with pytest.raises(InputError, match="a refutation needs a reason"):
        life.do(lifecycle.refute, item_id=item, reason="  ", actor=life.store.sme)
    assert life.state(item) == "active"
