"""Cases, citations, compliance and demotion (model §4.2)."""

from __future__ import annotations

import pytest

import lifecycle
from claims._queries import TRANSITIONS
from predicates.errors import CaseNotOpen, Forbidden, NotFound
from tests.lifecycle.helpers import Life, ids


@pytest.mark.parametrize(
    ("kind", "influence", "level", "threshold", "expected"),
    [
        ("fact", "decisive", None, "required", "na"),
        ("episode", "ignored", "required", "advisory", "na"),
        ("skill", "decisive", None, "required", "complied"),
        ("skill", "contributing", "required", "required", "complied"),
        ("skill", "ignored", "required", "required", "violation"),
        ("skill", "considered", "recommended", "required", "discretion"),
        ("skill", "considered", "recommended", "recommended", "violation"),
        ("skill", "ignored", None, "advisory", "violation"),
        ("skill", "ignored", None, "recommended", "discretion"),
    ],
)
def test_compliance_is_derived(
    kind: str, influence: str, level: str | None, threshold: str, expected: str
) -> None:
    assert lifecycle.compliance(kind, influence, level, threshold) == expected


def test_cite_needs_the_item_in_the_open_case_context(life: Life) -> None:
    own = life.write()
    other = life.write()
    life.activate(other)
    life.open("INC-2")
    with pytest.raises(lifecycle.NotInContext) as err:
        life.cite("INC-2", other, "decisive")
    assert err.value.code == "not_in_context"
    with pytest.raises(lifecycle.NotInContext):
        life.cite("INC-2", own, "decisive")  # a case item of another case
    life.hot()
    assert ids(life.recall("INC-2")) == [other]
    cited = life.cite("INC-2", other, "contributing")
    assert (cited.influence, cited.compliance) == ("contributing", "na")
    assert life.cite("INC-1", own, "considered").influence == "considered"  # its own case
    with pytest.raises(Forbidden):
        life.do(
            lifecycle.cite, case_id="INC-1", item_id=own, influence="decisive", actor=life.store.sme
        )
    with pytest.raises(NotFound):
        life.cite("INC-9", own, "decisive")
    life.close("INC-2")
    with pytest.raises(CaseNotOpen):
        life.cite("INC-2", other, "decisive")
    assert life.scalar("SELECT count(*) FROM audit_log WHERE action = 'cite'") == 2


def test_counter_beats_support_and_nothing_is_revoked(life: Life) -> None:
    followed, considered, in_case = life.write(), life.write(), life.write()
    life.activate(followed, considered)
    life.hot()
    life.open("INC-2")
    life.recall("INC-2")
    life.cite("INC-2", followed, "decisive")
    life.cite("INC-2", considered, "decisive")
    res = life.close("INC-2", "confirmed")
    assert res.signals == {followed: "support", considered: "support"} and res.demoted == ()
    life.open("INC-3")
    life.recall("INC-3")
    life.cite("INC-3", followed, "decisive")
    life.cite("INC-3", considered, "considered")
    life.cite("INC-1", in_case, "decisive")
    res = life.close("INC-3", "rejected")
    assert res.signals == {followed: "counter", considered: "counter"}
    assert res.demoted == (followed,)
    assert life.states(followed, considered) == ["needs_reverification", "active"]
    life.close("INC-1", "rejected")
    assert life.state(in_case) == "case"  # a counter on a case item moves nothing
    assert life.scalar(f"SELECT count(*) FROM {TRANSITIONS} h WHERE to_state = 'revoked'") == 0
    assert (
        life.scalar(
            f"SELECT actor FROM {TRANSITIONS} h WHERE item_id = :i AND to_state = "
            "'needs_reverification'",
            i=followed,
        )
        == lifecycle.SYSTEM_ACTOR
    )
    assert life.history_holds() and life.audit_ok()


def test_skill_citation_violates_a_binding_skill(life: Life) -> None:
    skill = life.write(kind="skill", attribute="drain_procedure", object="E-1", version=1)
    sme, agent = life.store.sme, life.store.agent
    life.do(lifecycle.set_enforcement, item_id=skill, level="required", reason="r", actor=sme)
    with pytest.raises(Forbidden):
        life.do(lifecycle.set_enforcement, item_id=skill, level="advisory", reason="r", actor=agent)
    assert life.cite("INC-1", skill, "ignored").compliance == "violation"
    life.do(lifecycle.set_enforcement, item_id=skill, level="advisory", reason="r", actor=sme)
    assert life.cite("INC-1", skill, "ignored").compliance == "discretion"
    assert life.cite("INC-1", skill, "decisive").compliance == "complied"
