"""Proposals: the exported schema, the extractor protocol and deterministic consolidation.

Every model answer here is a recording (tests/claims/data/recorded-answers.json);
no test talks to a live model.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import claims
from caveat.cli import app
from predicates.errors import InputError, NotFound
from tests.claims._support import chain_ok, count, rows
from tests.claims.conftest import new_tenant_store
from tests.conftest import T0, Store

#: Items with their current state (migration 0007).
J = "items i JOIN item_states s ON s.item_id = i.id"

DATA = Path(__file__).parent / "data" / "recorded-answers.json"
RECORDING = json.loads(DATA.read_text())
TURNS = {t["turn"]["id"]: claims.AgentTurn(**t["turn"]) for t in RECORDING["turns"]}
INC1 = claims.Anchor(axis="case", id="INC-1")


def _turn(turn_id: str) -> claims.AgentTurn:
    t = TURNS[turn_id]
    return claims.AgentTurn(t.id, t.text, t.case_id, tuple(t.evidence), tuple(t.subjects))


def apply(store: Store, turn_id: str, **kw: Any) -> claims.BatchResult:
    extractor = claims.RecordedExtractor.from_file(DATA)
    return claims.consolidate(
        extractor.extract(_turn(turn_id)),
        sessions=store.sessions,
        tenant=store.tenant,
        actor=store.agent,
        scope=INC1,
        now=T0,
        source=turn_id,
        **kw,
    )


def _shape(result: claims.BatchResult) -> list[tuple[str, str | None]]:
    return [(o.outcome, o.code) for o in result.outcomes]


def test_the_schema_is_strict_and_lists_every_field() -> None:
    schema = claims.proposal_json_schema()
    proposal = schema["$defs"]["Proposal"]
    assert proposal["additionalProperties"] is False and schema["additionalProperties"] is False
    assert sorted(proposal["required"]) == sorted(proposal["properties"])
    assert set(proposal["properties"]) == set(claims.Proposal.model_fields)
    assert schema["required"] == ["proposals"]


def test_recorded_answers_validate_against_the_exported_schema_or_fail_visibly() -> None:
    validator = jsonschema.Draft202012Validator(claims.proposal_json_schema())
    verdicts = {}
    for t in RECORDING["turns"]:
        for i, p in enumerate(t["answer"]["proposals"]):
            errors = list(validator.iter_errors({"proposals": [p]}))
            pydantic_ok = True
            try:
                claims.Proposal.model_validate(p)
            except Exception:
                pydantic_ok = False
            assert pydantic_ok == (not errors), (t["turn"]["id"], i, errors)
            verdicts[(t["turn"]["id"], i)] = pydantic_ok
    assert verdicts[("INC-1/turn-3", 4)] is False  # an extra field
    assert verdicts[("INC-1/turn-7", 2)] is False  # epistemic "certain"
    assert sum(verdicts.values()) == len(verdicts) - 2


def test_caveat_schema_proposals_prints_the_schema() -> None:
    res = CliRunner().invoke(app, ["schema", "proposals"])
    assert res.exit_code == 0
    assert json.loads(res.output) == claims.proposal_json_schema()


def test_consolidating_a_turn(tstore: Store) -> None:
    result = apply(tstore, "INC-1/turn-3")
    assert _shape(result) == [
        ("accepted", None),
        ("accepted", None),
        ("rejected", "object_is_rule"),
        ("rejected", "condition_unparsable"),
        ("rejected", "proposal_invalid"),
        ("duplicate", "duplicate_no_change"),
        ("accepted", None),
    ]
    o = result.outcomes
    assert o[5].item_id == o[0].item_id
    assert "confidence" in (o[4].message or "")
    stored = rows(
        tstore,
        "SELECT kind, epistemic, release_state, version, scope_axis, scope_id FROM items "
        "WHERE tenant_id = :t ORDER BY id",
    )
    assert [tuple(r) for r in stored] == [
        ("fact", "observation", None, None, "case", "INC-1"),
        ("fact", "hypothesis", None, None, "case", "INC-1"),
        ("skill", "observation", "draft", 1, "case", "INC-1"),
    ]
    audit = rows(
        tstore,
        "SELECT action, code, detail FROM audit_log WHERE tenant_id = :t "
        "AND action IN ('proposed', 'applied', 'rejected', 'superseded', 'transition') "
        "ORDER BY seq",
    )
    actions = [(r.action, r.code) for r in audit]
    assert actions[:7] == [("proposed", None)] * 7
    assert sorted(a for a in actions[7:] if a[0] != "transition") == sorted(
        [("applied", "accepted")] * 3
        + [
            ("rejected", "object_is_rule"),
            ("rejected", "condition_unparsable"),
            ("rejected", "proposal_invalid"),
            ("rejected", "duplicate_no_change"),
        ]
    )
    proposed = [r.detail for r in audit if r.action == "proposed"]
    assert [p["index"] for p in proposed] == list(range(7))
    assert {p["source"] for p in proposed} == {"INC-1/turn-3"}
    assert proposed[4]["proposal"]["confidence"] == 0.93  # recorded as the model said it
    # every outcome row points back to its `proposed` row
    seqs = {
        r.detail["proposal_seq"]
        for r in audit
        if r.action in {"applied", "rejected"} and "proposal_seq" in r.detail
    }
    assert len(seqs) == 7
    assert chain_ok(tstore)


def test_a_later_turn_supersedes(tstore: Store) -> None:
    first = apply(tstore, "INC-1/turn-2")
    second = apply(tstore, "INC-1/turn-7")
    assert _shape(second) == [
        ("accepted", None),
        ("rejected", "evidence_unresolved"),
        ("rejected", "proposal_invalid"),
    ]
    assert second.outcomes[0].superseded == first.outcomes[0].item_id
    [sup] = rows(
        tstore,
        "SELECT item_id, detail FROM audit_log WHERE tenant_id = :t AND action = 'superseded'",
    )
    assert sup.item_id == first.outcomes[0].item_id
    assert sup.detail["successor"] == second.outcomes[0].item_id


def test_consolidation_is_deterministic(shared_engine: Any) -> None:
    a, b = new_tenant_store(shared_engine), new_tenant_store(shared_engine)
    results = [apply(s, "INC-1/turn-3") for s in (a, b)]
    assert _shape(results[0]) == _shape(results[1])
    assert [o.message for o in results[0].outcomes] == [o.message for o in results[1].outcomes]

    def stored(s: Store) -> list[tuple[Any, ...]]:
        return [
            tuple(r)
            for r in rows(
                s,
                "SELECT kind, subject, attribute, object, required, conditions, cond_key, "
                "evidence, epistemic, content_type, facets, purposes, acl, text, entities, "
                "salience, version, release_state, s.state "
                f"FROM {J} WHERE i.tenant_id = :t ORDER BY i.id",
            )
        ]

    def audited(s: Store) -> list[tuple[Any, ...]]:
        return [
            (r.action, r.code, {k: v for k, v in r.detail.items() if k != "key_digest"})
            for r in rows(
                s,
                "SELECT action, code, detail FROM audit_log WHERE tenant_id = :t "
                "AND action IN ('proposed', 'rejected') ORDER BY seq",
            )
        ]

    assert stored(a) == stored(b)
    assert audited(a) == audited(b)


def test_consolidating_again_changes_nothing(tstore: Store) -> None:
    apply(tstore, "INC-1/turn-3")
    items = count(tstore, "SELECT count(*) FROM items WHERE tenant_id = :t")
    again = apply(tstore, "INC-1/turn-3")
    assert [o.outcome for o in again.outcomes] == [
        "duplicate",
        "duplicate",
        "rejected",
        "rejected",
        "rejected",
        "duplicate",
        "duplicate",
    ]
    assert count(tstore, "SELECT count(*) FROM items WHERE tenant_id = :t") == items


def test_proposals_carry_no_authority(tstore: Store) -> None:
    raw = RECORDING["turns"][0]["answer"]["proposals"][0]
    for field, value in (
        ("scope", {"axis": "tenant", "id": "*"}),
        ("acl", []),
        ("state", "active"),
    ):
        result = claims.consolidate(
            [{**raw, field: value}],
            sessions=tstore.sessions,
            tenant=tstore.tenant,
            actor=tstore.agent,
            scope=INC1,
            now=T0,
        )
        assert _shape(result) == [("rejected", "proposal_invalid")]
    # the caller's anchor is policy-gated like any write
    result = claims.consolidate(
        [raw],
        sessions=tstore.sessions,
        tenant=tstore.tenant,
        actor=tstore.agent,
        scope=claims.Anchor(axis="tenant", id="*"),
        now=T0,
    )
    assert _shape(result) == [("rejected", "axis_not_writable")]


def test_proposal_objects_and_raw_json_are_consolidated_alike(tstore: Store) -> None:
    raw = RECORDING["turns"][0]["answer"]["proposals"][0]
    result = claims.consolidate(
        [claims.Proposal.model_validate(raw), raw],
        sessions=tstore.sessions,
        tenant=tstore.tenant,
        actor=tstore.agent,
        scope=INC1,
        now=T0,
    )
    assert _shape(result) == [("accepted", None), ("duplicate", "duplicate_no_change")]


def test_the_extractor_protocol() -> None:
    extractor = claims.RecordedExtractor.from_file(DATA)
    assert isinstance(extractor, claims.Extractor)
    assert len(extractor.extract(_turn("INC-1/turn-3"))) == 7
    with pytest.raises(NotFound):
        extractor.extract(claims.AgentTurn("nope", "nothing recorded"))
    with pytest.raises(InputError):
        claims.parse_model_output("Sure! Here are the proposals: ...")
    with pytest.raises(InputError):
        claims.parse_model_output('{"claims": []}')


def test_proposals_apply_cli(
    tstore: Store, open_case: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("DATABASE_URL", tstore.engine.url.render_as_string(hide_password=False))
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(RECORDING["turns"][2]["answer"]))
    runner = CliRunner()
    args = ["proposals", "apply", str(answer), "--case", open_case, "--tenant", tstore.tenant]
    res = runner.invoke(app, [*args, "--as", "agent-ir", "--json"])
    assert res.exit_code == 0, res.output
    [out] = json.loads(res.output)
    assert out["outcome"] == "accepted" and out["state"] == "case"
    again = runner.invoke(app, [*args, "--as", "agent-ir"])
    assert again.exit_code == 0 and "duplicate" in again.output
    closed = runner.invoke(app, [*args[:3], "--case", "INC-404", "--tenant", tstore.tenant])
    assert closed.exit_code == 1 and "not_found" in closed.output
    both = runner.invoke(app, [*args, "--scope", "session:s-1"])
    assert both.exit_code == 2


def test_a_nul_byte_in_a_proposal_is_a_refusal_with_its_audit_row(
    tstore: Store, open_case: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("DATABASE_URL", tstore.engine.url.render_as_string(hide_password=False))
    answer = copy.deepcopy(RECORDING["turns"][2]["answer"])
    answer["proposals"][0]["text"] = "pool\x00exhausted"
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(answer))
    args = ["proposals", "apply", str(path), "--case", open_case, "--tenant", tstore.tenant]
    res = CliRunner().invoke(app, [*args, "--as", "agent-ir", "--json"])
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    [out] = json.loads(res.output)
    assert out["outcome"] == "rejected" and out["code"] == "text_invalid"
    with tstore.engine.connect() as conn:
        codes = conn.execute(
            sa.text("SELECT code FROM audit_log WHERE tenant_id = :t AND action = 'rejected'"),
            {"t": tstore.tenant},
        ).scalars()
        assert list(codes) == ["text_invalid"]
