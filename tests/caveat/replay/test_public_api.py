"""The public surface of caveat.replay is pinned: changing it is a decision."""

from __future__ import annotations

import inspect

import caveat.replay as replay

EXPECTED = {
    "ACTION_MODELS",
    "EXPECT_MODELS",
    "Action",
    "ActionName",
    "AdvanceArgs",
    "AttachEvidenceArgs",
    "AuditVerifyArgs",
    "AuditVerifyExpect",
    "CheckContextArgs",
    "CheckContextExpect",
    "CiteArgs",
    "CloseCaseArgs",
    "DiffArgs",
    "DiffCause",
    "DiffExpect",
    "DiffInstant",
    "EntitySpec",
    "EventArgs",
    "EvidenceArgs",
    "Expect",
    "ExpectStateArgs",
    "HookArgs",
    "HookExpect",
    "Failure",
    "ItemState",
    "Observation",
    "ObserveArgs",
    "OpenCaseArgs",
    "Policy",
    "Principal",
    "PromoteArgs",
    "RecallArgs",
    "RecallExpect",
    "RecallGate",
    "RefuteArgs",
    "RevokeArgs",
    "Role",
    "Scenario",
    "ScenarioResult",
    "SchemaEntry",
    "Scope",
    "ShadowPolicy",
    "SourceKind",
    "Stance",
    "Step",
    "StepRecord",
    "VerifyArgs",
    "WriteArgs",
    "WriteExpect",
    "WriteGate",
    "exit_status",
    "format_duration",
    "load_scenario",
    "parse_duration",
    "parse_scenario",
    "prepare_template",
    "render_text",
    "run_all",
    "run_scenario",
    "to_json",
    "write_junit",
}


def test_public_names() -> None:
    assert set(replay.__all__) == EXPECTED
    assert len(replay.__all__) == len(set(replay.__all__))
    for name in replay.__all__:
        assert hasattr(replay, name), name


def test_public_functions_and_classes_have_docstrings() -> None:
    for name in replay.__all__:
        obj = getattr(replay, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj), name
