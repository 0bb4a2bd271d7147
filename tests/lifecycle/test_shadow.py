"""The shadow period: log, conclude, graduate or drop, report (model §4.1)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

import factgen
import lifecycle
from claims._queries import TRANSITIONS
from factgen import ShadowPolicy
from predicates.errors import Forbidden, IllegalTransition
from tests.conftest import ADMIN
from tests.lifecycle.helpers import Life, ids, withheld


def _policy(life: Life, **shadow: float) -> None:
    with life.sessions.begin() as s:
        factgen.ensure_tenant(
            actor=ADMIN,
            session=s,
            tenant=life.tenant,
            now=life.now,
            policy=factgen.TenantPolicy(shadow=ShadowPolicy(**shadow)),  # type: ignore[arg-type]
        )


def _shadow(life: Life, **changes: object) -> int:
    item = life.write(**changes)  # type: ignore[arg-type]
    life.do(lifecycle.promote, item_id=item, to="shadow", actor=life.store.sme)
    return item


def _log(life: Life, item: int) -> list[tuple[str, int, int, bool, str | None, bool | None]]:
    with life.engine.connect() as c:
        rows = c.execute(
            sa.text(
                "SELECT case_id, recalls, matched_recalls, matched, outcome, agreed "
                "FROM shadow_log WHERE item_id = :i ORDER BY case_id"
            ),
            {"i": item},
        ).all()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def test_decide_shadow_is_pure() -> None:
    policy = ShadowPolicy(min_matched_cases=2, min_agreement=0.75)

    def stats(matched: int, agreed: int) -> lifecycle.ShadowStats:
        return lifecycle.ShadowStats(1, "s", "a", None, matched, matched, 0, agreed)

    assert lifecycle.decide_shadow(stats(1, 1), policy) is None
    assert lifecycle.decide_shadow(stats(2, 2), policy) == "graduate"
    assert lifecycle.decide_shadow(stats(4, 3), policy) == "graduate"
    assert lifecycle.decide_shadow(stats(4, 2), policy) == "drop"
    vacuous = ShadowPolicy(min_matched_cases=0, min_agreement=1.0)
    assert lifecycle.decide_shadow(stats(0, 0), vacuous) == "graduate"


def test_shadow_items_are_logged_never_returned(life: Life) -> None:
    item = _shadow(life)
    life.hot()
    res = life.recall("INC-1")  # its own case: not returned, not logged
    assert item not in ids(res) and withheld(res) == {item: "activated_version"}
    life.open("INC-2")
    life.recall("INC-2")
    life.recall("INC-2", subjects=["orders-db"])  # out of the subject filter: not a candidate
    life.recall("INC-2", purpose="postmortem")
    life.recall()  # outside any case: nothing to conclude, not logged
    life.observe(("payment-api", "metrics.pool_utilisation", 0.1))
    life.recall("INC-2")
    assert _log(life, item) == [("INC-2", 3, 2, True, None, None)]
    life.close("INC-2", "rejected")
    assert _log(life, item) == [("INC-2", 3, 2, True, "rejected", False)]


def test_graduation_and_drop_out_by_thresholds(life: Life) -> None:
    _policy(life, min_matched_cases=2, min_agreement=0.5)
    good, bad, unmatched = (
        _shadow(life),
        _shadow(life),
        _shadow(life, required=["env.postgres.version gte v99"]),
    )
    life.close("INC-1", "confirmed")
    life.hot()
    for n, outcome in ((2, "confirmed"), (3, "confirmed")):
        life.open(f"INC-{n}")
        life.recall(f"INC-{n}")
        res = life.close(f"INC-{n}", outcome)
    assert res.graduated == (good, bad) and life.states(good, bad) == ["active", "active"]
    assert life.state(unmatched) == "shadow"
    # another item: both of its matched cases conclude the other way
    life.open("INC-4")
    dropper = _shadow(life, case_id="INC-4")
    life.close("INC-4", "confirmed")
    for n in (5, 6):
        life.open(f"INC-{n}")
        life.recall(f"INC-{n}")
        res = life.close(f"INC-{n}", "rejected")
    assert res.dropped == (dropper,) and life.state(dropper) == "case"
    actor = life.scalar(
        f"SELECT actor FROM {TRANSITIONS} h WHERE item_id = :i ORDER BY seq DESC LIMIT 1",
        i=dropper,
    )
    assert actor == lifecycle.SYSTEM_ACTOR
    assert life.history_holds() and life.audit_ok()


def test_sme_drops_early(life: Life) -> None:
    item = _shadow(life)
    with pytest.raises(Forbidden):
        life.do(lifecycle.drop, item_id=item, actor=life.store.agent)
    rec = life.do(lifecycle.drop, item_id=item, actor=life.store.sme, rationale="too broad")
    assert rec.state == "case"
    with pytest.raises(IllegalTransition):
        life.do(lifecycle.drop, item_id=item, actor=life.store.sme)
    assert (
        life.scalar(
            f"SELECT reason FROM {TRANSITIONS} h WHERE item_id = :i ORDER BY seq DESC LIMIT 1",
            i=item,
        )
        == "too broad"
    )


def test_shadow_report_distribution(life: Life) -> None:
    _policy(life, min_matched_cases=1, min_agreement=0.9)
    a, b = _shadow(life), _shadow(life, required=["env.postgres.version gte v99"])
    life.close("INC-1", "rejected")  # their own case concluded rejected
    life.hot()
    life.open("INC-2")
    life.recall("INC-2")
    with life.sessions.begin() as s:
        before = lifecycle.shadow_report(session=s, tenant=life.tenant, actor=life.store.sme)
    assert {st.item_id: (st.cases, st.matched, st.pending) for st in before.items} == {
        a: (1, 0, 1),
        b: (1, 0, 0),
    }
    # closing confirmed disagrees with a's own case (rejected): a drops, b waits
    res = life.close("INC-2", "confirmed")
    assert res.dropped == (a,) and life.state(a) == "case"
    with life.sessions.begin() as s:
        report = lifecycle.shadow_report(session=s, tenant=life.tenant, actor=life.store.sme)
    assert [st.item_id for st in report.items] == [b]
    assert report.matched_distribution["0"] == 1 and sum(report.matched_distribution.values()) == 1
    assert report.agreement_distribution["n/a"] == 1
    assert report.would_graduate == () and report.would_drop == ()
