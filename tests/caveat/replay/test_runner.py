"""The runner on a real store: attach_evidence, budgets and confidence, the dense queue."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import pytest

import recall
from caveat import app, db
from caveat.replay import ScenarioResult, parse_scenario, run_scenario
from caveat.replay._runner import Replayer, settings_embedder

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
HEAD = """\
caveat_scenario: 1
name: runner
tenant: acme
start: 2026-03-01T09:00:00Z
principals:
  agent-ir: {role: agent, capabilities: [incidents]}
  sme-bob: {role: sme, capabilities: [incidents]}
schema:
  - {attribute: config.pool.max, type: int}
entities:
  - {id: api, kind: service}
steps:
  - open_case: {id: INC-1, subjects: [api]}
  - observe: [{subject: api, attribute: config.pool.max, value: 20}]
  - evidence: {id: E-1}
  - write:
      ref: restart
      kind: fact
      subject: api
      attribute: restart_restored_service
      object: E-1
      required: [config.pool.max eq 20]
      evidence: [E-1]
      text: "api tail latency: pool exhausted; a restart restored service."
  - write:
      ref: resize
      kind: fact
      subject: api
      attribute: resize_restored_service
      object: E-1
      required: [config.pool.max eq 20]
      evidence: [E-1]
      text: "api pool exhausted; resizing the pool restored service."
"""
QUERY = "api tail latency pool exhausted restart"


@pytest.fixture(scope="module")
def hashing() -> recall.Embedder:
    embedder = recall.make_embedder("hashing")
    assert embedder is not None
    return embedder


class Run(Protocol):
    """Replays ``HEAD`` followed by ``body`` (hashing embedder unless told)."""

    def __call__(self, body: str, *, embedder: recall.Embedder | None = ...) -> ScenarioResult: ...


_HASHING: Any = object()


@pytest.fixture
def run(pg_server_url: str, template_db: str, hashing: recall.Embedder) -> Run:
    def go(body: str, *, embedder: recall.Embedder | None = _HASHING) -> ScenarioResult:
        return run_scenario(
            parse_scenario(HEAD + body, "runner.yaml"),
            path="runner.yaml",
            server_url=pg_server_url,
            template=template_db,
            embedder=hashing if embedder is _HASHING else embedder,
        )

    return go


def _result(res: ScenarioResult, index: int) -> dict[str, Any]:
    return res.steps[index].result


# --- the dense channel sees every write --------------------------------------


def test_recall_drains_the_embedding_queue_first(run: Run) -> None:
    res = run(f"  - recall: {{query: {QUERY!r}, subjects: [api]}}\n")
    assert res.ok, res.failures
    out = _result(res, 5)
    assert "dense" in out["channels"]
    assert (out["embedded"], out["not_embedded"]) == (2, 0)
    assert set(out["items"]) == {"restart", "resize"}


def test_without_an_embedder_there_is_no_dense_channel(run: Run) -> None:
    res = run(f"  - recall: {{query: {QUERY!r}, subjects: [api]}}\n", embedder=None)
    assert res.ok, res.failures
    assert "dense" not in _result(res, 5)["channels"]


def test_the_queue_is_empty_after_a_recall_step(
    pg_server_url: str, template_db: str, hashing: recall.Embedder
) -> None:
    scenario = parse_scenario(
        HEAD + f"  - recall: {{query: {QUERY!r}, record: false}}\n", "runner.yaml"
    )
    with db.with_database(pg_server_url, template=template_db, prefix="caveat_t") as url:
        engine = db.make_app_engine(url)
        try:
            rt = app.Runtime.over(engine, scenario.tenant, embedder=hashing)
            sessions = rt.sessions
            replayer = Replayer(scenario, rt)
            replayer.setup()
            for step in scenario.steps[:-1]:
                replayer.run_step(step)
            with sessions.begin() as s:
                assert recall.queue_depth(session=s, tenant=scenario.tenant) == 2
            record, failures = replayer.run_step(scenario.steps[-1])
            assert not failures
            with sessions.begin() as s:
                assert recall.queue_depth(session=s, tenant=scenario.tenant) == 0
            assert record.result["not_embedded"] == 0
        finally:
            engine.dispose()


def test_the_settings_name_the_embedder_once_per_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAVEAT_EMBEDDER", "hashing")
    first = settings_embedder()
    assert first is not None and first is settings_embedder()
    monkeypatch.setenv("CAVEAT_EMBEDDER", "none")
    assert settings_embedder() is None


# --- attach_evidence -----------------------------------------------------------


ATTACH = (
    "  - attach_evidence:\n"
    "      {{item: {item}, evidence: E-1, stance: {stance}, strength: {strength},"
    " source_kind: {kind}}}\n"
    "    as: {actor}\n"
)


def _attach(
    item: str = "restart",
    stance: str = "supports",
    strength: float = 1,
    kind: str = "citation",
    actor: str = "sme-bob",
) -> str:
    return ATTACH.format(item=item, stance=stance, strength=strength, kind=kind, actor=actor)


def test_attach_evidence_moves_confidence(run: Run) -> None:
    res = run(
        _attach("restart", "supports", 0.8, "human_confirm")
        + _attach("resize", "refutes", 1, "citation", "agent-ir")
    )
    assert res.ok, res.failures
    up, down = _result(res, 5), _result(res, 6)
    assert up["stance"] == "supports" and up["source_kind"] == "human_confirm"
    assert up["confidence_after"] > up["confidence_before"]
    assert down["confidence_after"] < down["confidence_before"]
    assert (up["item"], up["evidence"], up["strength"]) == ("restart", "E-1", 0.8)
    summary = res.steps[5].summary
    assert summary.startswith("attaches E-1 to restart: supports (human_confirm, strength 0.8)")
    assert " -> " in summary


def test_an_agent_may_not_confirm(run: Run) -> None:
    refused = _attach(kind="human_confirm", actor="agent-ir")
    res = run(refused + "    expect: {error: forbidden}\n")
    assert res.ok, res.failures
    assert _result(res, 5)["error"]["code"] == "forbidden"
    # Without the expectation, the refusal is a failed expectation of its own.
    res = run(refused)
    assert [(f.action, f.expectation, f.expected) for f in res.failures] == [
        ("attach_evidence", "error", "success")
    ]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (_attach().replace("E-1", "E-404"), "evidence_unresolved"),
        (
            "  - write: {ref: gone, kind: fact, subject: nobody, attribute: x, object: 1,"
            " evidence: [E-1]}\n    expect: {outcome: rejected}\n" + _attach(item="gone"),
            "invalid_input",
        ),
    ],
    ids=["unregistered evidence", "a ref whose write was refused"],
)
def test_attach_evidence_errors_are_expectable(run: Run, body: str, code: str) -> None:
    assert run(body + f"    expect: {{error: {code}}}\n").ok
    failures = run(body + "    expect: {error: not_found}\n").failures
    assert [(f.expectation, f.expected, f.got) for f in failures] == [("error", "not_found", code)]


def test_min_confidence_and_ranking(run: Run) -> None:
    recall_step = f"  - recall: {{query: {QUERY!r}, subjects: [api], record: false"
    res = run(
        _attach("restart", "refutes", 1, "human_confirm")
        + _attach("resize", "supports", 1, "human_confirm")
        + recall_step
        + "}\n    expect: {order: [resize, restart]}\n"
        + recall_step
        + ", min_confidence: 0.5}\n    expect: {include: [resize], exclude: [restart]}\n"
    )
    assert res.ok, res.failures
    confidence = _result(res, 7)["confidence"]
    assert confidence["resize"] > 0.9 > 0.2 > confidence["restart"]
    assert _result(res, 8)["items"] == ["resize"]


# --- packing ---------------------------------------------------------------------


def test_packed_result_is_reported_and_checked(run: Run) -> None:
    body = (
        f"  - recall: {{query: {QUERY!r}, subjects: [api], budget: 400, record: false}}\n"
        "    expect: {packed_include: [restart, resize], packed_within_budget: true}\n"
        f"  - recall: {{query: {QUERY!r}, subjects: [api], budget: 0, record: false}}\n"
        "    expect: {packed_exclude: [restart, resize], packed_within_budget: true}\n"
    )
    res = run(body)
    assert res.ok, res.failures
    big, empty = _result(res, 5)["packed"], _result(res, 6)["packed"]
    assert isinstance(big, dict) and isinstance(empty, dict)
    assert set(big["items"]) == {"restart", "resize"} and big["omitted"] == []
    assert big["budget"] == 400 and 0 < big["tokens"] <= 400
    assert "restored service" in big["text"]
    assert empty == {
        "items": [],
        "item_ids": [],
        "omitted": empty["omitted"],
        "tokens": 0,
        "budget": 0,
        "text": "",
        "blocks": [],
        "prefix": "",
    }
    assert set(empty["omitted"]) == {"restart", "resize"}
    assert "packs nothing in 0/0 tokens" in res.steps[6].summary
    # Expectations that do not hold are reported against the packed result.
    wrong = (
        f"  - recall: {{query: {QUERY!r}, subjects: [api], budget: 400, record: false}}\n"
        "    expect: {packed_exclude: [restart], packed_within_budget: true}\n"
        f"  - recall: {{query: {QUERY!r}, subjects: [api], budget: 0, record: false}}\n"
        "    expect: {packed_include: [restart], packed_within_budget: true}\n"
    )
    failures = run(wrong).failures
    assert [(f.step_index, f.expectation) for f in failures] == [
        (5, "packed_exclude"),
        (6, "packed_include"),
    ]


def test_a_recall_without_a_budget_packs_nothing(run: Run) -> None:
    res = run(f"  - recall: {{query: {QUERY!r}}}\n")
    assert res.ok and _result(res, 5)["packed"] is None


# --- the bundled scenario's expectations can fail -----------------------------------


BUNDLED = (SCENARIOS / "confidence-and-packing.yaml").read_text()


def _run_text(text: str, pg_server_url: str, template_db: str) -> ScenarioResult:
    return run_scenario(
        parse_scenario(text, "confidence-and-packing.yaml"),
        path="confidence-and-packing.yaml",
        server_url=pg_server_url,
        template=template_db,
        embedder=recall.make_embedder("hashing"),
    )


def _without(text: str, block: str) -> str:
    assert text.count(block) == 1, block
    return text.replace(block, "")


def test_confidence_and_packing_passes(pg_server_url: str, template_db: str) -> None:
    res = _run_text(BUNDLED, pg_server_url, template_db)
    assert res.ok, [f.describe() for f in res.failures]


def test_without_the_evidence_the_order_and_the_packing_fail(
    pg_server_url: str, template_db: str
) -> None:
    text = BUNDLED
    for block in (
        "  - attach_evidence:\n"
        "      {item: pod-recycle, evidence: E-7002, stance: supports, strength: 0.9,"
        " source_kind: human_confirm}\n    as: sme-alice\n",
        "  - attach_evidence:\n"
        "      {item: rolling-restart, evidence: E-7003, stance: refutes, strength: 1,"
        " source_kind: citation}\n    as: sme-alice\n",
        "  - attach_evidence:\n"
        "      {item: rolling-restart, evidence: E-7003, stance: refutes, strength: 0.5,"
        " source_kind: agent_judge}\n",
    ):
        text = _without(text, block)
    failed = {f.expectation for f in _run_text(text, pg_server_url, template_db).failures}
    assert {"order", "exclude", "packed_include", "packed_exclude"} <= failed


def test_a_larger_budget_packs_the_refuted_precedent(pg_server_url: str, template_db: str) -> None:
    text = BUNDLED.replace("budget: 100\n", "budget: 400\n")
    assert text != BUNDLED
    failures = _run_text(text, pg_server_url, template_db).failures
    assert [f.expectation for f in failures] == ["packed_exclude"]


# --- refutation over lineage (model §4.4) ---------------------------------------------


def test_refutation_lineage_passes(pg_server_url: str, template_db: str) -> None:
    """The refuted item and its re-opened descendants leave the context and recall, and a
    write derived from them is refused ``lineage_refuted``."""
    path = SCENARIOS / "refutation-lineage.yaml"
    res = run_scenario(
        parse_scenario(path.read_text(), path.name),
        path=path.name,
        server_url=pg_server_url,
        template=template_db,
        embedder=recall.make_embedder("hashing"),
    )
    assert res.ok, [f.describe() for f in res.failures]


def test_a_cite_step_takes_expected_observed_and_a_rationale(run: Run) -> None:
    res = run(
        "  - write: {ref: drain, kind: skill, subject: api, attribute: drain_procedure,"
        " object: E-1, required: [config.pool.max eq 20], evidence: [E-1],"
        " text: drain the pool before a restart}\n"
        "  - cite: {item: drain, influence: ignored, expected: drain, observed: drain,"
        " rationale: drained first}\n"
        "  - cite: {item: drain, influence: decisive, expected: 20, observed: '20'}\n"
        "  - cite: {item: resize, influence: ignored, expected: 20}\n"
        "    expect: {error: invalid_input}\n"
    )
    assert res.ok, res.failures
    # the values decide: equal is complied whatever the influence; 20 is not "20", and
    # an advisory skill under the default threshold (required) is discretion
    assert _result(res, 6) == {"influence": "ignored", "compliance": "complied"}
    assert _result(res, 7) == {"influence": "decisive", "compliance": "discretion"}
