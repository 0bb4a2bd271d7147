"""Every action and rule of format 1, on small scenarios written here."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import get_args

import pytest
from pydantic import ValidationError

import lifecycle
from caveat.replay import (
    ACTION_MODELS,
    EXPECT_MODELS,
    AdvanceArgs,
    AttachEvidenceArgs,
    AuditVerifyArgs,
    CiteArgs,
    DiffArgs,
    DiffExpect,
    EventArgs,
    EvidenceArgs,
    Expect,
    HookArgs,
    HookExpect,
    Observation,
    PromoteArgs,
    RecallArgs,
    RecallExpect,
    RefuteArgs,
    Scenario,
    Scope,
    SourceKind,
    Stance,
    Step,
    WriteArgs,
    WriteExpect,
    parse_scenario,
)
from predicates.errors import ScenarioError

HEAD = """\
caveat_scenario: 1
name: every-action
tenant: acme
start: 2026-03-01T09:00:00Z
principals:
  sme-bob: {role: sme, capabilities: [incidents, payments-restricted]}
  agent-ir: {role: agent}
  admin-ann: {role: admin}
"""
T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)

EVERY_ACTION = (
    HEAD
    + """\
description: all the actions
policy:
  shadow: {min_matched_cases: 2, min_agreement: 0.8}
  permission_refusal_ttl: 1h
  writes: incognito
schema:
  - {attribute: config.pool.max, type: int, unit: connections, content_type: configuration}
  - {attribute: deploy.colour, type: "enum[blue, green]"}
  - {attribute: "metrics.*.p99", type: duration, max_age: 30s}
entities:
  - {id: api, kind: service, aliases: [api-prod], depends_on: [db], runs_on: [node-1]}
  - {id: db, kind: database}
  - {id: node-1, kind: host}
steps:
  - open_case: {id: INC-1, subjects: [api]}
  - observe:
      - {subject: api, attribute: config.pool.max, value: 20}
  - evidence: {id: E-1, title: timeline, uri: "https://example.test/E-1", readers: [incidents]}
  - write:
      ref: w1
      kind: episode
      subject: api
      attribute: restart_restored_service_at
      object: E-1
      required: [config.pool.max eq 20]
      excluded: ["deploy.colour eq green"]
      evidence: [E-1]
      epistemic: hypothesis
      content_type: configuration
      scope: case:INC-1
      text: restart restored it
      purposes: [incident_diagnosis, postmortem]
    expect: {outcome: accepted, state: case}
  - write:
      ref: w2
      kind: skill
      subject: api
      attribute: restart_procedure_version
      object: {version: 3}
      evidence: [E-1]
      derived_from: [w1]
      scope: {axis: team, id: payments}
    expect: {outcome: rejected, gate: G4, code: object_is_rule}
  - cite: {item: w1, influence: decisive}
  - close_case: {id: INC-1, outcome: rejected}
    at: +30m
  - verify: {item: w2}
    as: sme-bob
    expect: {error: not_found}
  - refute: {item: w1, reason: wrong}
    as: sme-bob
  - promote: {item: w1, to: shadow}
    as: sme-bob
    expect: {error: illegal_transition}
  - revoke: {item: w1, reason: wrong}
    as: sme-bob
  - event:
      type: deploy
      subjects: [api]
      changes: {config.pool.max: 100}
  - event: {type: authorisation, subjects: [], principal: agent-ir}
    as: admin-ann
  - advance: 12d
  - recall:
      query: pool exhausted
      subjects: [api]
      purpose: incident_diagnosis
      observations: [{subject: api, attribute: config.pool.max, value: 20}]
      as_of: 2026-03-01T10:00:00Z
      explain: true
      limit: 5
    at: +1s
    expect:
      include: [w1]
      order: [w1]
      exclude: [w2]
      count: 1
      withheld: {w2: activated_version}
      missing_observations: [deploy.colour]
      unknown_to_caller: []
  - check_context: {items: [w1, w2]}
    expect: {usable: [], dropped: [w1, w2]}
  - audit_verify: {}
    expect: {ok: true}
  - expect_state: {w1: revoked, w2: archived}
    at: 2026-03-14T09:31:01+01:00
  - diff: {from: -13d, to: 2026-03-14T08:31:01Z, subjects: [api], purpose: postmortem}
    expect:
      became: [w1]
      stopped: [w2]
      causes: {w1: transition, w2: supersession}
      unknown_to_caller: []
  - attach_evidence: {item: w1, evidence: E-1, stance: refutes, strength: 1, source_kind: citation}
    as: sme-bob
    expect: {error: not_found}
  - hook:
      kind: github
      delivery: d-1
      headers: {X-GitHub-Event: ping}
      payload: {zen: "Keep it logically awesome."}
    expect: {done: [ignored], duplicate: false}
  - block: {label: escalation, text: "Page the DBA on call.", scope: "team:db"}
    as: sme-bob
  - docs: {id: runbooks/api.md, text: "# API\\n\\nRestart it.", readers: [incidents]}
    as: sme-bob
"""
)


@pytest.fixture(scope="module")
def every() -> Scenario:
    return parse_scenario(EVERY_ACTION, "every.yaml")


def test_every_action_is_read(every: Scenario) -> None:
    assert {s.action for s in every.steps} == set(ACTION_MODELS)
    for step in every.steps:
        assert type(step.args) is ACTION_MODELS[step.action]
        if step.expect is not None:
            assert type(step.expect) is EXPECT_MODELS.get(step.action, Expect)


def test_header_options(every: Scenario) -> None:
    assert every.description == "all the actions"
    assert every.policy.shadow is not None
    assert every.policy.shadow.min_matched_cases == 2
    assert every.policy.shadow.min_agreement == 0.8
    assert every.policy.permission_refusal_ttl == timedelta(hours=1)
    assert every.policy.writes == "incognito"
    assert every.schema_[0].unit == "connections"
    assert every.schema_[1].type == "enum[blue, green]"
    assert every.schema_[2].attribute == "metrics.*.p99"
    assert every.schema_[2].max_age == timedelta(seconds=30)
    assert every.entities[0].runs_on == ["node-1"]
    assert every.entities[1].aliases == []


def test_default_actor_is_the_first_agent(every: Scenario) -> None:
    by_action = {s.action: s.actor for s in every.steps}
    assert by_action["open_case"] == "agent-ir"  # sme-bob is listed first
    assert by_action["verify"] == "sme-bob"
    assert [s.actor for s in every.steps if s.action == "event"] == ["agent-ir", "admin-ann"]


def test_typed_arguments(every: Scenario) -> None:
    args = {s.index: s.args for s in every.steps}
    assert args[2] == EvidenceArgs(
        id="E-1", title="timeline", uri="https://example.test/E-1", readers=["incidents"]
    )
    w1, w2 = args[3], args[4]
    assert isinstance(w1, WriteArgs) and isinstance(w2, WriteArgs)
    assert w1.kind == "episode" and w1.epistemic == "hypothesis"
    assert w1.required == ["config.pool.max eq 20"]
    assert w1.excluded == ["deploy.colour eq green"]
    assert w1.scope == Scope(axis="case", id="INC-1")
    assert w1.purposes == ["incident_diagnosis", "postmortem"]
    assert w2.object == {"version": 3} and w2.derived_from == ["w1"]
    assert w2.scope == Scope(axis="team", id="payments")
    assert args[5] == CiteArgs(item="w1", influence="decisive")
    assert args[8] == RefuteArgs(item="w1", reason="wrong")
    assert args[9] == PromoteArgs(item="w1", to="shadow")
    assert args[11] == EventArgs(type="deploy", subjects=["api"], changes={"config.pool.max": 100})
    assert args[12] == EventArgs(type="authorisation", subjects=[], principal="agent-ir")
    assert args[13] == AdvanceArgs(by=timedelta(days=12))
    recall = args[14]
    assert recall == RecallArgs(
        query="pool exhausted",
        subjects=["api"],
        purpose="incident_diagnosis",
        observations=[Observation(subject="api", attribute="config.pool.max", value=20)],
        as_of=datetime(2026, 3, 1, 10, tzinfo=UTC),
        explain=True,
        limit=5,
    )
    assert args[16] == AuditVerifyArgs()


def test_typed_expectations(every: Scenario) -> None:
    expect = {s.index: s.expect for s in every.steps}
    assert expect[4] == WriteExpect(outcome="rejected", gate="G4", code="object_is_rule")
    assert expect[7] == Expect(error="not_found")
    assert expect[14] == RecallExpect(
        include=["w1"],
        order=["w1"],
        exclude=["w2"],
        count=1,
        withheld={"w2": "activated_version"},
        missing_observations=["deploy.colour"],
        unknown_to_caller=[],
    )
    assert expect[5] is None


def test_resolved_times(every: Scenario) -> None:
    at = [s.at for s in every.steps]
    half_past = T0 + timedelta(minutes=30)
    assert at[:6] == [T0] * 6
    assert at[6:13] == [half_past] * 7
    # advance moves its own step and everything after it
    assert at[13] == half_past + timedelta(days=12)
    assert at[14] == at[13] + timedelta(seconds=1)
    assert at[15] == at[16] == at[14]
    # an absolute time with an offset is normalised to UTC
    assert at[17] == datetime(2026, 3, 14, 8, 31, 1, tzinfo=UTC)
    assert all(t.tzinfo is UTC for t in at)


def _steps(body: str) -> list[Step]:
    return parse_scenario(HEAD + "steps:\n" + body, "t.yaml").steps


def test_time_forms() -> None:
    steps = _steps(
        "  - audit_verify: {}\n    at: '2026-03-01T09:00:00Z'\n"
        "  - audit_verify: {}\n    at: 2026-03-01T10:00:00Z\n"
        "  - audit_verify: {}\n    at: '2026-03-01 11:00:00+00:00'\n"
        "  - audit_verify: {}\n    at: +0s\n"
        "  - audit_verify: {}\n"
        "  - advance: 90s\n"
        "  - advance: 1m\n    at: +1h\n"
    )
    hours = [T0, T0 + timedelta(hours=1), T0 + timedelta(hours=2)]
    assert [s.at for s in steps] == [
        *hours,
        hours[2],
        hours[2],
        hours[2] + timedelta(seconds=90),
        hours[2] + timedelta(seconds=90, hours=1, minutes=1),
    ]


def test_start_as_a_string_with_an_offset() -> None:
    text = HEAD.replace("start: 2026-03-01T09:00:00Z", "start: '2026-03-01T10:00:00+01:00'")
    scenario = parse_scenario(text + "steps:\n  - audit_verify:\n", "t.yaml")
    assert scenario.start == T0
    assert scenario.steps[0].at == T0


def test_without_an_agent_the_first_principal_acts() -> None:
    text = HEAD.replace("  agent-ir: {role: agent}\n", "")
    steps = parse_scenario(text + "steps:\n  - audit_verify: {}\n", "t.yaml").steps
    assert steps[0].actor == "sme-bob"


def test_null_step_keys_mean_absent() -> None:
    (step,) = _steps("  - audit_verify:\n    at:\n    as:\n    expect:\n")
    assert (step.at, step.actor, step.expect, step.args) == (
        T0,
        "agent-ir",
        None,
        AuditVerifyArgs(),
    )


def test_scope_forms() -> None:
    def scope(text: str) -> Scope | None:
        write = (
            "  - write: {ref: a, kind: fact, subject: s, attribute: x, object: 1, evidence: [],"
            f" scope: {text}}}\n"
        )
        args = _steps(write)[0].args
        assert isinstance(args, WriteArgs)
        return args.scope

    assert scope("tenant") == Scope(axis="tenant", id="*")
    assert scope("'tenant:*'") == Scope(axis="tenant", id="*")
    assert scope("'case:INC-1'") == Scope(axis="case", id="INC-1")
    assert scope("'session:a:b'") == Scope(axis="session", id="a:b")
    assert scope("{axis: agent, id: agent-ir}") == Scope(axis="agent", id="agent-ir")
    assert scope("null") is None


def test_a_rejected_write_still_names_its_ref() -> None:
    steps = _steps(
        "  - write: {ref: g1, kind: fact, subject: nobody, attribute: x, object: 1,"
        " evidence: []}\n    expect: {outcome: rejected, gate: G3}\n"
        "  - expect_state: {g1: archived}\n"
        "  - write: {ref: g2, kind: fact, subject: s, attribute: x, object: 1, evidence: [],"
        " derived_from: [g1]}\n"
    )
    assert [s.action for s in steps] == ["write", "expect_state", "write"]


def test_error_alone_and_duplicate_with_its_code() -> None:
    steps = _steps(
        "  - write: {ref: a, kind: fact, subject: s, attribute: x, object: 1, evidence: []}\n"
        "    expect: {outcome: duplicate, code: duplicate_no_change}\n"
        "  - cite: {item: a, influence: ignored}\n    expect: {error: case_not_open}\n"
    )
    assert steps[0].expect == WriteExpect(outcome="duplicate", code="duplicate_no_change")
    assert steps[1].expect == Expect(error="case_not_open")


def test_models_are_frozen_and_strict() -> None:
    args = EvidenceArgs(id="E-1")
    with pytest.raises(ValidationError):
        args.id = "E-2"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        RecallArgs.model_validate({"query": "q", "limit": "10"})
    with pytest.raises(ValidationError):
        RecallArgs.model_validate({"query": "q", "explain": 1})
    with pytest.raises(ValidationError):
        EvidenceArgs.model_validate({"id": "E", "colour": "red"})


def test_step_args_must_fit_the_action() -> None:
    with pytest.raises(ValidationError, match="a recall step takes RecallArgs"):
        Step(index=0, line=1, action="recall", args=AuditVerifyArgs(), at=T0, actor="a")
    with pytest.raises(ValidationError, match="checked with RecallExpect"):
        Step(
            index=0,
            line=1,
            action="recall",
            args=RecallArgs(query="q"),
            at=T0,
            actor="a",
            expect=WriteExpect(),
        )


def test_diff_bounds_and_expectations(every: Scenario) -> None:
    step = every.steps[18]
    assert step.args == DiffArgs.model_validate(
        {
            "from": "-13d",
            "to": "2026-03-14T08:31:01Z",
            "subjects": ["api"],
            "purpose": "postmortem",
        }
    )
    assert isinstance(step.args, DiffArgs)
    assert step.args.from_ == -timedelta(days=13)  # resolved against the step's time by replay
    assert step.args.to == datetime(2026, 3, 14, 8, 31, 1, tzinfo=UTC)
    assert step.expect == DiffExpect(
        became=["w1"],
        stopped=["w2"],
        causes={"w1": "transition", "w2": "supersession"},
        unknown_to_caller=[],
    )


def test_recall_record_flag() -> None:
    steps = _steps("  - recall: {query: q}\n  - recall: {query: q, record: false}\n")
    assert [s.args.record for s in steps if isinstance(s.args, RecallArgs)] == [True, False]


def test_attach_evidence(every: Scenario) -> None:
    step = every.steps[19]
    assert step.action == "attach_evidence" and step.actor == "sme-bob"
    assert step.args == AttachEvidenceArgs(
        item="w1", evidence="E-1", stance="refutes", strength=1.0, source_kind="citation"
    )
    assert isinstance(step.args, AttachEvidenceArgs) and type(step.args.strength) is float
    assert step.expect == Expect(error="not_found")


def test_hook(every: Scenario) -> None:
    step = every.steps[20]
    assert step.action == "hook"
    assert step.args == HookArgs(
        kind="github",
        payload={"zen": "Keep it logically awesome."},
        delivery="d-1",
        headers={"X-GitHub-Event": "ping"},
    )
    assert step.expect == HookExpect(done=["ignored"], duplicate=False)


def test_a_hook_of_an_unknown_kind_is_malformed() -> None:
    with pytest.raises(ScenarioError) as err:
        _steps("  - hook: {kind: nagios, payload: {}}\n")
    assert "nagios" in err.value.message


def test_attach_evidence_kinds_are_the_lifecycle_s() -> None:
    assert set(get_args(SourceKind)) == set(lifecycle.SOURCE_KINDS)
    assert set(get_args(Stance)) == set(lifecycle.STANCES)
    for kind in lifecycle.SOURCE_KINDS:
        for stance in lifecycle.STANCES:
            (step,) = _steps(
                f"  - write: {{ref: a, kind: fact, subject: s, attribute: x, object: 1,"
                f" evidence: []}}\n  - attach_evidence: {{item: a, evidence: E, stance: {stance},"
                f" strength: 0, source_kind: {kind}}}\n"
            )[1:]
            assert isinstance(step.args, AttachEvidenceArgs)
            assert (step.args.stance, step.args.source_kind) == (stance, kind)


def test_recall_budget_min_confidence_and_packed_expectations() -> None:
    steps = _steps(
        "  - write: {ref: a, kind: fact, subject: s, attribute: x, object: 1, evidence: []}\n"
        "  - write: {ref: b, kind: fact, subject: s, attribute: y, object: 1, evidence: []}\n"
        "  - recall: {query: q, budget: 0, min_confidence: 1}\n"
        "    expect: {packed_exclude: [a, b], packed_within_budget: true}\n"
        "  - recall: {query: q, budget: 120, min_confidence: 0.25}\n"
        "    expect:\n"
        "      include: [a, b]\n"
        "      packed_include: [a]\n"
        "      packed_exclude: [b]\n"
        "  - recall: {query: q}\n"
    )
    first, second, plain = (s for s in steps if isinstance(s.args, RecallArgs))
    assert isinstance(first.args, RecallArgs) and isinstance(second.args, RecallArgs)
    assert (first.args.budget, first.args.min_confidence) == (0, 1.0)
    assert (second.args.budget, second.args.min_confidence) == (120, 0.25)
    assert first.expect == RecallExpect(packed_exclude=["a", "b"], packed_within_budget=True)
    assert second.expect == RecallExpect(
        include=["a", "b"], packed_include=["a"], packed_exclude=["b"]
    )
    assert isinstance(plain.args, RecallArgs)
    assert (plain.args.budget, plain.args.min_confidence) == (None, None)


def test_attach_evidence_model_is_strict() -> None:
    good = {"item": "a", "evidence": "E", "stance": "supports", "strength": 0.5}
    good["source_kind"] = "agent_judge"
    AttachEvidenceArgs.model_validate(good)
    for bad in (
        {"strength": "0.5"},
        {"strength": True},
        {"strength": -0.1},
        {"strength": 1.01},
        {"strength": float("nan")},
        {"stance": "neutral"},
        {"source_kind": "gut_feeling"},
        {"evidence": ""},
        {"colour": "red"},
    ):
        with pytest.raises(ValidationError):
            AttachEvidenceArgs.model_validate({**good, **bad})
