"""The scenarios bundled in scenarios/ load into the expected typed steps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from caveat.replay import (
    AuditVerifyExpect,
    CheckContextArgs,
    CheckContextExpect,
    CloseCaseArgs,
    EvidenceArgs,
    ExpectStateArgs,
    ObserveArgs,
    OpenCaseArgs,
    PromoteArgs,
    RecallArgs,
    RecallExpect,
    RevokeArgs,
    Scenario,
    VerifyArgs,
    WriteArgs,
    WriteExpect,
    load_scenario,
)

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def _load(name: str) -> Scenario:
    return load_scenario(SCENARIOS / f"{name}.yaml")


def test_every_bundled_scenario_loads() -> None:
    paths = sorted(SCENARIOS.glob("*.yaml"))
    assert {p.stem for p in paths} >= {"pool-max-change", "revocation-lineage", "write-gate"}
    for path in paths:
        scenario = load_scenario(path)
        assert scenario.name == path.stem
        assert [step.index for step in scenario.steps] == list(range(len(scenario.steps)))


def test_pool_max_change_header() -> None:
    sc = _load("pool-max-change")
    assert sc.caveat_scenario == 1
    assert sc.tenant == "acme"
    assert sc.start == datetime(2026, 3, 1, 9, tzinfo=UTC)
    assert sc.description.startswith("A verified precedent")
    assert {name: p.role for name, p in sc.principals.items()} == {
        "agent-ir": "agent",
        "sme-alice": "sme",
    }
    assert sc.principals["sme-alice"].capabilities == ["incidents"]
    assert [e.attribute for e in sc.schema_] == [
        "config.connection_pool.max",
        "metrics.pool_utilisation",
        "metrics.p99_latency_ms",
    ]
    assert sc.schema_[0].type == "int"
    assert sc.schema_[0].content_type == "configuration"
    assert sc.schema_[0].max_age is None
    assert sc.schema_[1].max_age == timedelta(minutes=15)
    api = sc.entities[0]
    assert (api.id, api.kind, api.aliases, api.depends_on) == (
        "payment-api",
        "service",
        ["payment_api", "paymentapi-prod"],
        ["payments-db"],
    )
    assert sc.policy.shadow is None and sc.policy.writes is None


def test_pool_max_change_steps_times_and_actors() -> None:
    sc = _load("pool-max-change")
    start = datetime(2026, 3, 1, 9, tzinfo=UTC)
    closed = start + timedelta(hours=2)
    deploy = closed + timedelta(days=12)
    again = deploy + timedelta(days=9)
    expected = [
        ("open_case", 20, start, "agent-ir"),
        ("observe", 21, start, "agent-ir"),
        ("evidence", 25, start, "agent-ir"),
        ("write", 26, start, "agent-ir"),
        ("close_case", 40, closed, "agent-ir"),
        ("verify", 42, closed, "sme-alice"),
        ("promote", 44, closed, "sme-alice"),
        ("promote", 46, closed, "sme-alice"),
        ("expect_state", 48, closed, "agent-ir"),
        ("observe", 51, deploy, "agent-ir"),
        ("open_case", 56, again, "agent-ir"),
        ("observe", 58, again, "agent-ir"),
        ("recall", 61, again, "agent-ir"),
        ("recall", 72, again, "agent-ir"),
    ]
    assert [(s.action, s.line, s.at, s.actor) for s in sc.steps] == expected
    assert deploy == datetime(2026, 3, 13, 11, tzinfo=UTC)
    assert again == datetime(2026, 3, 22, 11, tzinfo=UTC)


def test_pool_max_change_typed_args_and_expectations() -> None:
    steps = _load("pool-max-change").steps
    assert steps[0].args == OpenCaseArgs(id="INC-1041", subjects=["payment-api"])
    observe = steps[1].args
    assert isinstance(observe, ObserveArgs)
    assert [(o.subject, o.attribute, o.value, o.source) for o in observe.observations] == [
        ("payment_api", "config.connection_pool.max", 20, "config"),
        ("paymentapi-prod", "metrics.pool_utilisation", 0.97, "prometheus"),
        ("payment-api", "metrics.p99_latency_ms", 2400, "prometheus"),
    ]
    assert type(observe.observations[0].value) is int
    assert type(observe.observations[1].value) is float
    evidence = steps[2].args
    assert isinstance(evidence, EvidenceArgs)
    assert evidence.id == "E-1041" and evidence.readers is None
    assert evidence.title is not None and evidence.title.startswith("INC-1041 timeline")
    write = steps[3].args
    assert isinstance(write, WriteArgs)
    assert (write.ref, write.kind, write.subject, write.object) == (
        "pool-restart",
        "fact",
        "paymentapi-prod",
        "E-1041",
    )
    assert write.required == [
        "config.connection_pool.max eq 20",
        "metrics.pool_utilisation gte 0.8",
    ]
    assert write.evidence == ["E-1041"]
    assert (write.epistemic, write.content_type, write.scope) == (
        "observation",
        "failure_mechanism",
        None,
    )
    assert write.excluded == [] and write.derived_from == [] and write.purposes == []
    assert steps[3].expect == WriteExpect(outcome="accepted", state="case")
    assert steps[4].args == CloseCaseArgs(id="INC-1041", outcome="confirmed")
    assert steps[5].args == VerifyArgs(item="pool-restart")
    assert [s.args for s in steps[6:8]] == [
        PromoteArgs(item="pool-restart", to="shadow"),
        PromoteArgs(item="pool-restart", to="active"),
    ]
    assert steps[8].args == ExpectStateArgs(states={"pool-restart": "active"})
    first, second = steps[12], steps[13]
    assert isinstance(first.args, RecallArgs) and isinstance(second.args, RecallArgs)
    assert first.args.explain is True and first.args.purpose == "incident_diagnosis"
    assert first.args.subjects == ["payment-api"] and first.args.limit is None
    assert first.expect == RecallExpect(
        exclude=["pool-restart"], withheld={"pool-restart": "applicability"}
    )
    assert second.args.explain is False
    assert [(o.attribute, o.value) for o in second.args.observations] == [
        ("config.connection_pool.max", 20),
        ("metrics.pool_utilisation", 0.91),
    ]
    assert second.expect == RecallExpect(include=["pool-restart"])
    assert all(s.expect is None for s in steps if s.index not in (3, 12, 13))


def test_revocation_lineage() -> None:
    sc = _load("revocation-lineage")
    steps = sc.steps
    assert len(steps) == 17
    start = datetime(2026, 5, 1, tzinfo=UTC)
    assert steps[9].at == start
    assert steps[10].at == start + timedelta(days=3)
    assert steps[13].at == start + timedelta(days=3, seconds=30)
    assert steps[16].at == steps[13].at
    assert [s.actor for s in steps[6:10]] == ["sme-bob"] * 4
    assert steps[13].actor == "sme-bob" and steps[14].actor == "agent-ir"
    derived = steps[4].args
    assert isinstance(derived, WriteArgs)
    assert derived.derived_from == ["base"] and derived.object == 900
    assert steps[13].args == RevokeArgs(
        item="base", reason="vacuum was coincidental; lag cleared on its own"
    )
    assert steps[14].args == CheckContextArgs(items=["base", "derived"])
    assert steps[14].expect == CheckContextExpect(dropped=["base", "derived"])
    assert steps[15].args == ExpectStateArgs(
        states={"base": "revoked", "derived": "needs_reverification"}
    )
    assert steps[16].expect == WriteExpect(outcome="rejected", code="lineage_revoked")
    assert sc.schema_[0].type == "version"


def test_write_gate() -> None:
    steps = _load("write-gate").steps
    assert len(steps) == 12
    expectations = [(s.expect.gate, s.expect.code) for s in steps[2:9]]  # type: ignore[union-attr]
    assert expectations == [
        ("G1", "subject_unresolved"),
        ("G2", "condition_unparsable"),
        ("G2", "condition_unknown_attribute"),
        ("G2", "condition_type_mismatch"),
        ("G3", "evidence_missing"),
        ("G3", "evidence_unresolved"),
        ("G4", "object_is_rule"),
    ]
    g3 = steps[6].args
    assert isinstance(g3, WriteArgs) and g3.evidence == []
    assert steps[10].expect == WriteExpect(outcome="duplicate")
    assert steps[11].expect == AuditVerifyExpect(ok=True)
    assert {s.actor for s in steps} == {"agent-ir"}
    assert steps[2].line == 16 and steps[11].line == 97


@pytest.mark.parametrize("name", ["pool-max-change", "revocation-lineage", "write-gate"])
def test_load_is_deterministic(name: str) -> None:
    assert _load(name) == _load(name)


def test_belief_diff_uses_the_diff_step_and_a_recall_that_records_nothing() -> None:
    from caveat.replay import DiffArgs, DiffExpect

    sc = _load("belief-diff")
    diffs = [s for s in sc.steps if isinstance(s.args, DiffArgs)]
    assert len(diffs) == 4
    causes: set[str] = set()
    for step in diffs:
        assert isinstance(step.expect, DiffExpect)
        causes |= set((step.expect.causes or {}).values())
    assert causes == {"transition", "supersession", "fact_change", "validity_window"}
    assert any(d.expect.unknown_to_caller for d in diffs if isinstance(d.expect, DiffExpect))
    recalls = [s.args for s in sc.steps if isinstance(s.args, RecallArgs)]
    assert [r.record for r in recalls] == [False]
