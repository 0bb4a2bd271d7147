"""Citations with what a skill expected and what was observed; their listing, as the
reader may see it; enforcement levels; and a closed case's outcome moving the
confidence of what it cited (docs/lifecycle.md, "Cases, citations and demotion")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import claims
import lifecycle
from predicates.errors import Forbidden, InputError, NotFound
from tests.conftest import ADMIN
from tests.lifecycle.helpers import Life

LEVELS = st.sampled_from(lifecycle.ENFORCEMENT_LEVELS)
LEVEL_OR_NONE = st.one_of(st.none(), LEVELS)
INFLUENCE = st.sampled_from(lifecycle.INFLUENCES)
KINDS = st.sampled_from(["fact", "episode", "skill"])
SCALARS = st.one_of(
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


def _cite(life: Life, case: str, item: int, influence: str, **kw: Any) -> lifecycle.Citation:
    return life.do(  # type: ignore[no-any-return]
        lifecycle.cite,
        case_id=case,
        item_id=item,
        influence=influence,
        actor=kw.pop("actor", life.store.agent),
        **kw,
    )


def _list(life: Life, actor: Any = None, **kw: Any) -> list[lifecycle.Citation]:
    return life.do(  # type: ignore[no-any-return]
        _listed, actor=actor or life.store.agent, **kw
    )


_PAGE = {"after", "limit"}


def _listed(*, now: Any, **kw: Any) -> list[lifecycle.Citation]:
    page = {k: kw.pop(k) for k in _PAGE & set(kw)}
    scope = {k: kw.pop(k) for k in ("session", "tenant", "actor")}
    return lifecycle.list_citations(**scope, filters=lifecycle.CitationFilter(**kw), **page)


def _enforce(life: Life, item: int, level: str, actor: Any = None) -> lifecycle.Enforcement:
    return life.do(  # type: ignore[no-any-return]
        lifecycle.set_enforcement,
        item_id=item,
        level=level,
        reason=f"runbook review: {level}",
        actor=actor or life.store.sme,
    )


# --- the law of compliance ----------------------------------------------------------


@given(KINDS, INFLUENCE, LEVEL_OR_NONE, LEVELS, VALUES, VALUES)
def test_compliance_of_values_is_their_equality_whatever_the_influence(
    kind: str, influence: str, level: str | None, threshold: str, expected: Any, observed: Any
) -> None:
    got = lifecycle.compliance(kind, influence, level, threshold, expected, observed)
    swapped = lifecycle.compliance(kind, influence, level, threshold, observed, expected)
    assert got == swapped  # symmetric
    if kind != "skill":
        assert got == "na"
    elif lifecycle.same_value(expected, observed):
        assert got == "complied"
    else:
        assert got == ("violation" if lifecycle.binding(level, threshold) else "discretion")
    other = next(i for i in lifecycle.INFLUENCES if i != influence)
    assert lifecycle.compliance(kind, other, level, threshold, expected, observed) == got
    if kind == "skill":  # a value always equals itself
        assert lifecycle.compliance(kind, influence, level, threshold, expected, expected) == (
            "complied"
        )


@given(INFLUENCE, LEVEL_OR_NONE, LEVELS, LEVELS)
def test_a_stricter_level_or_a_lower_threshold_never_excuses(
    influence: str, level: str | None, threshold: str, other: str
) -> None:
    """Bindingness is monotone: raising the level, or lowering the threshold, never turns
    a violation into discretion; and followed is complied at every level."""
    order = lifecycle.ENFORCEMENT_LEVELS.index
    at = lifecycle.compliance("skill", influence, level, threshold)
    higher = max(level or "advisory", other, key=order)
    lower = min(threshold, other, key=order)
    if at == "violation":
        assert lifecycle.compliance("skill", influence, higher, threshold) == "violation"
        assert lifecycle.compliance("skill", influence, level, lower) == "violation"
    if influence in lifecycle.FOLLOWED:
        assert at == "complied"


def test_same_value_is_typed() -> None:
    assert lifecycle.same_value(20, 20.0) and lifecycle.same_value("restart", "restart")
    assert not lifecycle.same_value(20, "20") and not lifecycle.same_value(True, 1)
    assert not lifecycle.same_value(False, 0) and lifecycle.same_value([1, {"a": 2}], [1, {"a": 2}])
    assert not lifecycle.same_value({"a": 1}, {"a": 1, "b": 2})
    assert not lifecycle.same_value("Restart", "restart")


# --- cite with values -----------------------------------------------------------------


def test_a_skill_cited_with_values_complies_when_they_match(life: Life) -> None:
    skill = life.write(kind="skill", attribute="drain_procedure", object="E-1", version=1)
    _enforce(life, skill, "required")
    same = _cite(life, "INC-1", skill, "ignored", expected="drain", observed="drain")
    assert same.compliance == "complied"  # the values decide, whatever the influence
    off = _cite(
        life, "INC-1", skill, "decisive", expected=20, observed=40, rationale="  pool at 40  "
    )
    assert (off.compliance, off.expected, off.observed, off.rationale) == (
        "violation",
        20,
        40,
        "pool at 40",
    )
    _enforce(life, skill, "recommended")  # under the threshold (required): not binding
    assert _cite(life, "INC-1", skill, "decisive", expected=20, observed=40).compliance == (
        "discretion"
    )
    listed = _list(life, case_id="INC-1")
    assert [(c.item_id, c.expected, c.observed, c.rationale) for c in listed] == [
        (skill, 20, 40, None)  # a citation again replaces every field
    ]
    detail = life.scalar(
        "SELECT detail FROM audit_log WHERE action = 'cite' ORDER BY seq DESC LIMIT 1"
    )
    assert detail["expected"] == 20 and detail["level"] == "recommended"


def test_a_fact_cited_with_values_is_na_and_keeps_them(life: Life) -> None:
    fact = life.write()
    cited = _cite(life, "INC-1", fact, "decisive", expected=20, observed=20, rationale="why")
    assert (cited.compliance, cited.expected, cited.rationale) == ("na", 20, "why")


@pytest.mark.parametrize(
    ("kw", "attribute"),
    [
        ({"expected": 20}, "observed"),
        ({"observed": 20}, "expected"),
        ({"expected": float("nan"), "observed": 1}, "expected"),
        ({"expected": {1, 2}, "observed": 1}, "expected"),
    ],
)
def test_values_come_in_pairs_of_json_values(
    life: Life, kw: dict[str, Any], attribute: str
) -> None:
    fact = life.write()
    with pytest.raises(InputError) as err:
        _cite(life, "INC-1", fact, "decisive", **kw)
    assert err.value.detail["attribute"] == attribute
    assert life.scalar("SELECT count(*) FROM citations") == 0


def test_an_unknown_influence_names_the_field(life: Life) -> None:
    with pytest.raises(InputError) as err:
        _cite(life, "INC-1", life.write(), "crucial")
    assert err.value.detail["attribute"] == "influence"


# --- enforcement levels ----------------------------------------------------------------


def test_set_enforcement_is_audited_with_its_reason_and_shown_in_the_dossier(life: Life) -> None:
    skill = life.write(kind="skill", attribute="drain_procedure", object="E-1", version=1)
    cited = _cite(life, "INC-1", skill, "ignored")
    assert cited.compliance == "discretion"  # advisory, never set
    first = _enforce(life, skill, "required")
    assert (first.level, first.previous, first.set_by) == ("required", None, "sme-alice")
    again = _enforce(life, skill, "recommended")
    assert again.previous == "required"
    rows = life.scalar(
        "SELECT json_agg(json_build_array(code, detail) ORDER BY seq) FROM audit_log "
        "WHERE action = 'set_enforcement' AND item_id = :i",
        i=skill,
    )
    assert rows == [
        [
            "required",
            {"level": "required", "previous": "advisory", "reason": "runbook review: required"},
        ],
        [
            "recommended",
            {
                "level": "recommended",
                "previous": "required",
                "reason": "runbook review: recommended",
            },
        ],
    ]
    # the citation made before keeps the compliance it was derived with
    assert [c.compliance for c in _list(life, item_id=skill)] == ["discretion"]
    d = life.do(
        lifecycle.dossier,
        item_id=skill,
        actor=life.store.sme,
        world=d_world(life),
    )
    assert d.enforcement is not None and d.enforcement.level == "recommended"
    assert d.enforcement.reason == "runbook review: recommended" and d.binding is False
    fact = life.do(
        lifecycle.dossier,
        item_id=life.write(),
        actor=life.store.sme,
        world=d_world(life),
    )
    assert fact.enforcement is None and fact.binding is None


def d_world(life: Life) -> Any:
    import factgen

    with life.sessions.begin() as s:
        return factgen.load_world(session=s, tenant=life.tenant)


def test_set_enforcement_refusals(life: Life) -> None:
    skill = life.write(kind="skill", attribute="drain_procedure", object="E-1", version=1)
    with pytest.raises(InputError) as err:
        _enforce(life, skill, "mandatory")
    assert err.value.detail["attribute"] == "level"
    with pytest.raises(InputError) as err:
        life.do(
            lifecycle.set_enforcement,
            item_id=skill,
            level="required",
            reason=" ",
            actor=life.store.sme,
        )
    assert err.value.detail["attribute"] == "reason"
    with pytest.raises(InputError) as err:
        _enforce(life, life.write(), "required")
    assert "only skills" in err.value.message
    with pytest.raises(Forbidden):
        _enforce(life, skill, "required", actor=life.store.agent)
    with pytest.raises(NotFound):
        _enforce(life, 999_999, "required")
    assert life.scalar("SELECT count(*) FROM skill_enforcement") == 0


# --- listing, as the reader may see it ----------------------------------------------------


def test_list_citations_filters_pages_and_hides_what_the_reader_may_not_read(life: Life) -> None:
    a, b = life.write(), life.write()
    secret = life.write(actor=ADMIN, evidence=["E-secret"], object="E-secret")
    _cite(life, "INC-1", a, "decisive")
    life.tick(minutes=1)
    _cite(life, "INC-1", secret, "contributing", actor=ADMIN)
    life.tick(minutes=1)
    _cite(life, "INC-1", b, "ignored")
    t_b = life.now
    seen = [c.item_id for c in _list(life)]
    assert seen == [a, b]  # agent-ir (incidents) does not hold payments-restricted
    assert [c.item_id for c in _list(life, actor=life.store.sme)] == [a, secret, b]
    assert [c.item_id for c in _list(life, actor=ADMIN)] == [a, secret, b]
    # hidden means neither listed nor counted: a page of 1 past `a` is `b`, not empty
    first = _list(life, limit=1)
    assert [c.item_id for c in first] == [a]
    assert [c.item_id for c in _list(life, limit=1, after=first[0].key)] == [b]
    assert _list(life, after=(t_b, "INC-1", b)) == []
    assert [c.item_id for c in _list(life, influence="ignored")] == [b]
    assert [c.item_id for c in _list(life, compliance="na")] == [a, b]
    assert [c.item_id for c in _list(life, since=t_b)] == [b]
    assert [c.item_id for c in _list(life, until=t_b)] == [a]
    assert [c.kind for c in _list(life, item_id=a)] == ["fact"]
    with pytest.raises(NotFound):  # the same answer as an item that does not exist
        _list(life, item_id=secret)
    with pytest.raises(NotFound):
        _list(life, item_id=999_999)
    with pytest.raises(NotFound):
        _list(life, case_id="INC-404")
    with pytest.raises(Forbidden):
        _list(life, actor=claims.Actor("prom", "source"))


@pytest.mark.parametrize(
    ("kw", "attribute"),
    [
        ({"influence": "crucial"}, "influence"),
        ({"compliance": "complies"}, "compliance"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
    ],
)
def test_list_citations_refuses_bad_filters(life: Life, kw: dict[str, Any], attribute: str) -> None:
    with pytest.raises(InputError) as err:
        _list(life, **kw)
    assert err.value.detail["attribute"] == attribute


def test_list_citations_refuses_a_range_that_ends_before_it_starts(life: Life) -> None:
    with pytest.raises(InputError) as err:
        _list(life, since=life.now, until=life.now - timedelta(seconds=1))
    assert err.value.detail["attribute"] == "since"
    assert _list(life, since=life.now, until=life.now) == []  # empty, not refused


# --- a closed case's outcome moves the confidence of what it cited ----------------------


def _links(life: Life, item: int) -> list[tuple[str, str, float, str]]:
    rows = life.scalar(
        "SELECT coalesce(json_agg(json_build_array(evidence_id, stance, strength, source_kind) "
        "ORDER BY id), '[]') FROM evidence_links WHERE item_id = :i",
        i=item,
    )
    return [tuple(r) for r in rows]


def _confidence(life: Life, item: int) -> float:
    return life.do(  # type: ignore[no-any-return]
        lifecycle.confidence_of, item_id=item, actor=life.store.sme
    )


def test_a_confirmed_case_supports_what_it_cited_by_influence(life: Life) -> None:
    decisive, contributing, considered, ignored = (life.write() for _ in range(4))
    before = {i: _confidence(life, i) for i in (decisive, contributing, considered, ignored)}
    for item, influence in (
        (decisive, "decisive"),
        (contributing, "contributing"),
        (considered, "considered"),
        (ignored, "ignored"),
    ):
        _cite(life, "INC-1", item, influence)
    res = life.close("INC-1", "confirmed")
    assert _links(life, decisive) == [("case:INC-1", "supports", 0.5, "citation")]
    assert _links(life, contributing) == [("case:INC-1", "supports", 0.3, "citation")]
    assert _links(life, considered) == [("case:INC-1", "supports", 0.1, "citation")]
    assert _links(life, ignored) == []
    gain = {i: _confidence(life, i) - before[i] for i in before}
    assert gain[decisive] > gain[contributing] > gain[considered] > 0 == gain[ignored]
    assert set(res.confidence) == {decisive, contributing, considered}
    assert res.confidence[decisive][1] == pytest.approx(_confidence(life, decisive))
    row = life.scalar(
        "SELECT json_build_array(actor, code, detail) FROM audit_log "
        "WHERE action = 'attach_evidence' AND item_id = :i",
        i=decisive,
    )
    assert row[0] == lifecycle.SYSTEM_ACTOR and row[1] == "supports"
    assert {k: row[2][k] for k in ("case", "outcome", "influence", "closed_by")} == {
        "case": "INC-1",
        "outcome": "confirmed",
        "influence": "decisive",
        "closed_by": "agent-ir",
    }
    assert life.audit_ok()


def test_a_rejected_case_refutes_and_a_skill_not_followed_is_not_blamed(life: Life) -> None:
    fact = life.write()
    followed = life.write(kind="skill", attribute="drain_procedure", object="E-1", version=1)
    deviated = life.write(kind="skill", attribute="restart_procedure", object="E-1", version=1)
    _cite(life, "INC-1", fact, "contributing")
    _cite(life, "INC-1", followed, "decisive", expected="drain", observed="drain")
    _cite(life, "INC-1", deviated, "decisive", expected="restart", observed="rollback")
    before = _confidence(life, fact)
    res = life.close("INC-1", "rejected")
    assert _links(life, fact) == [("case:INC-1", "refutes", 0.3, "citation")]
    assert _links(life, followed) == [("case:INC-1", "refutes", 0.5, "citation")]
    assert _links(life, deviated) == []  # it was not followed: the outcome says nothing of it
    assert _confidence(life, fact) < before
    assert res.signals[deviated] == "counter"  # the signal is still recorded
    d = life.do(lifecycle.dossier, item_id=followed, actor=life.store.sme, world=d_world(life))
    assert [(x.evidence_id, x.source_kind, x.stance) for x in d.links] == [
        ("case:INC-1", "citation", "refutes")
    ]
    assert d.confidence == pytest.approx(_confidence(life, followed))
    assert [(c.expected, c.observed, c.compliance) for c in d.citations] == [
        ("drain", "drain", "complied")
    ]
    assert life.audit_ok()


def test_a_redacted_item_gets_no_link(life: Life) -> None:
    item = life.write()
    _cite(life, "INC-1", item, "decisive")
    life.do(lifecycle.redact, item_id=item, reason="leak", actor=life.store.sme)
    res = life.close("INC-1", "confirmed")
    assert _links(life, item) == [] and item not in res.confidence


def test_outcome_link_is_pure() -> None:
    assert lifecycle.outcome_link("support", "decisive", "na") == ("supports", 0.5)
    assert lifecycle.outcome_link("counter", "considered", "complied") == ("refutes", 0.1)
    assert lifecycle.outcome_link("support", "ignored", "na") is None
    assert lifecycle.outcome_link("support", "decisive", "violation") is None
    assert lifecycle.outcome_link("counter", "contributing", "discretion") is None
