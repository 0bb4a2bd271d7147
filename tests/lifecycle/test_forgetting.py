"""Forgetting: salience decay for ranking only, archiving, redaction, erasure, rollup."""

from __future__ import annotations

import pytest

import claims
import lifecycle
from predicates.errors import Forbidden, GateRejection, NotFound
from tests.conftest import ADMIN
from tests.lifecycle.helpers import POOL, Life, ids, withheld


def test_salience_decays_from_last_use_for_ranking_only(life: Life) -> None:
    old, used = life.write(), life.write()
    life.activate(old, used)
    life.tick(days=60)
    life.hot()
    first = life.recall(limit=1)
    assert len(first.items) == 1
    # both decayed equally; use one of them, then it ranks first and the set is unchanged
    life.tick(days=1)
    life.open("INC-2")
    life.hot()
    assert ids(life.recall("INC-2", limit=10)) == [old, used]  # a tie: by id
    life.tick(days=5)
    life.cite("INC-2", used, "considered")
    life.tick(days=1)
    life.hot()
    res = life.recall()
    assert ids(res) == [used, old]
    parts = {r.item.id: r.parts["effective_salience"] for r in res.items}
    assert parts[used] > parts[old] > 0
    assert life.scalar("SELECT uses FROM item_usage WHERE item_id = :i", i=used) == 3


def test_sweep_archives_unused_episodes_after_the_horizon(life: Life) -> None:
    episode = life.write(kind="episode", attribute="trace", object="E-1", required=[])
    fact = life.write(required=[])
    life.close("INC-1")
    life.tick(days=89)
    assert life.do(lifecycle.sweep).archived == ()
    life.tick(days=2)
    assert life.do(lifecycle.sweep).archived == (episode,)
    assert life.states(episode, fact) == ["archived", "case"]


def test_redaction_hides_an_item_everywhere(life: Life) -> None:
    item = life.write()
    life.activate(item)
    life.hot()
    then = life.now
    assert ids(life.recall()) == [item]
    life.tick(hours=1)
    with pytest.raises(Forbidden):
        life.do(lifecycle.redact, item_id=item, reason="pii", actor=life.store.agent)
    life.do(lifecycle.redact, item_id=item, reason="pii", actor=life.store.sme)
    life.hot()
    for res in (life.recall(), life.recall(as_of=then)):
        assert item not in ids(res) and item not in withheld(res)
    assert life.guard([item]).dropped == {item: "not_found"}
    with life.sessions.begin() as s, pytest.raises(NotFound):
        lifecycle.lineage(session=s, tenant=life.tenant, item_id=item, actor=life.store.sme)
    with pytest.raises(NotFound):
        life.do(lifecycle.verify, item_id=item, actor=life.store.sme)
    assert life.scalar("SELECT reason FROM redactions WHERE item_id = :i", i=item) == "pii"
    assert life.scalar("SELECT count(*) FROM audit_log WHERE action = 'redact'") == 1
    with pytest.raises(GateRejection) as err:  # nothing new is built on what was redacted
        life.write(derived_from=[item])
    assert err.value.code == "not_found" and str(item) in err.value.message


def test_forget_erases_a_subjects_items_with_a_record(life: Life) -> None:
    a = life.write()
    b = life.write(object="E-2", evidence=["E-2"])
    other = life.write(subject="orders-db", required=[])
    with pytest.raises(Forbidden):  # real erasure is the operator's (model §7)
        life.do(
            lifecycle.forget, axis="subject", target="payment_api", reason="x", actor=life.store.sme
        )
    erasure = life.do(
        lifecycle.forget, axis="subject", target="payment_api", reason="gdpr", actor=ADMIN
    )
    assert erasure.target == "payment-api" and erasure.items == (a, b)
    assert life.scalar("SELECT items FROM erasures WHERE id = :i", i=erasure.id) == 2
    assert ids(life.recall("INC-1")) == [other]
    anchor = life.do(
        lifecycle.forget,
        axis="case",
        target="INC-1",
        reason="case closed out",
        actor=ADMIN,
    )
    assert anchor.items == (other,)
    assert life.audit_ok()


def _episode(life: Life, text: str, evidence: str = "E-1", **kw: object) -> int:
    return life.write(
        kind="episode",
        attribute="trace",
        object=evidence,
        evidence=[evidence],
        text=text,
        **kw,  # type: ignore[arg-type]
    )


def test_cluster_episodes_is_deterministic() -> None:
    def ep(i: int, subject: str, text: str) -> claims.ItemRecord:
        return claims.ItemRecord(  # type: ignore[call-arg]
            **{
                f: None
                for f in claims.ItemRecord.__dataclass_fields__  # type: ignore[attr-defined]
            }
            | {"id": i, "subject": subject, "entities": (subject,), "text": text}
        )

    eps = [
        ep(3, "a", "pool exhausted restart restored latency"),
        ep(1, "a", "pool exhausted restart restored service"),
        ep(2, "a", "pool exhausted after restart restored"),
        ep(4, "b", "pool exhausted restart restored latency"),
        ep(5, "a", "disk filled cron cleanup freed space"),
    ]
    clusters = lifecycle.cluster_episodes(eps, min_size=2)
    assert [[e.id for e in c] for c in clusters] == [[1, 2, 3]]
    assert lifecycle.cluster_episodes(list(reversed(eps)), min_size=2) == clusters
    assert lifecycle.signature(clusters[0])[:4] == ("exhausted", "pool", "restart", "restored")


def test_rollup_writes_through_the_gate_and_archives_the_episodes(life: Life) -> None:
    with life.sessions.begin() as s:
        claims.register_evidence(
            session=s, tenant=life.tenant, evidence_id="E-3", actor=life.store.sme, now=life.now
        )
    eps = [
        _episode(life, f"Pool exhausted on payment-api, restart restored service {n}", ev)
        for n, ev in enumerate(["E-1", "E-2", "E-3"])
    ]
    lone = _episode(life, "Disk filled on the batch host", "E-2", subject="orders-db")
    with pytest.raises(Forbidden):
        lifecycle.rollup(
            sessions=life.sessions, tenant=life.tenant, actor=life.store.sme, now=life.now
        )
    assert (
        lifecycle.rollup(
            sessions=life.sessions, tenant=life.tenant, actor=life.store.agent, now=life.now
        )
        == []
    )  # the case is still open
    life.close("INC-1")
    [roll] = lifecycle.rollup(
        sessions=life.sessions, tenant=life.tenant, actor=life.store.agent, now=life.now
    )
    assert roll.item_id is not None and roll.episodes == tuple(eps)
    assert {"exhausted", "pool", "restart"} <= set(roll.signature)
    assert set(life.states(*eps)) == {"archived"} and life.state(lone) == "case"
    with life.sessions.begin() as s:
        item = claims.get_items(session=s, tenant=life.tenant, ids=[roll.item_id])[roll.item_id]
    assert item.derived_from == tuple(eps) and item.epistemic == "hypothesis"
    assert item.required == tuple(sorted(POOL))
    assert set(item.evidence) == {"E-1", "E-2", "E-3"}
    assert (item.scope_axis, item.state) == ("agent", "case")
    assert life.history_holds() and life.audit_ok()
