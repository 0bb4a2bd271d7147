"""A recall step takes every field of the doors' recall request: anchors tilt the
ranking, pinned items come back (and are packed) first, and what the request model
refuses is the step's invalid_input, as at a door."""

from __future__ import annotations

from typing import Any

import pytest

import recall
from caveat.replay import ScenarioResult, parse_scenario, run_scenario

QUERY = "api tail latency pool exhausted restart"
# Two items alike in every ranked respect but the case they were written in: on the tie
# (by id) the first written ranks first. The comments count steps from 0.
SCENARIO = f"""\
caveat_scenario: 1
name: anchors-and-pins
tenant: acme
start: 2026-03-01T09:00:00Z
principals:
  agent-ir: {{role: agent, capabilities: [incidents]}}
  sme-bob: {{role: sme, capabilities: [incidents]}}
schema:
  - {{attribute: config.pool.max, type: int}}
entities:
  - {{id: api, kind: service}}
steps:
  - observe: [{{subject: api, attribute: config.pool.max, value: 20}}]
  - evidence: {{id: E-1}}
  - open_case: {{id: INC-1, subjects: [api]}}
  - write:
      ref: first
      kind: fact
      subject: api
      attribute: restart_restored_service
      object: E-1
      required: [config.pool.max eq 20]
      evidence: [E-1]
      text: "api tail latency: pool exhausted; a restart restored service."
  - write:
      ref: big-pool
      kind: fact
      subject: api
      attribute: resize_restored_service
      object: E-1
      required: [config.pool.max eq 50]
      evidence: [E-1]
      text: "api tail latency with the pool at max 50: a restart restored service."
  - close_case: {{id: INC-1, outcome: confirmed}}
  - open_case: {{id: INC-2, subjects: [api]}}
  - write:
      ref: second
      kind: fact
      subject: api
      attribute: restart_restored_service
      object: E-1
      required: [config.pool.max eq 20]
      evidence: [E-1]
      text: "api tail latency: pool exhausted; a restart restored service."
  - close_case: {{id: INC-2, outcome: confirmed}}
  - {{promote: {{item: first, to: shadow}}, as: sme-bob}}
  - {{promote: {{item: first, to: active}}, as: sme-bob}}
  - {{promote: {{item: second, to: shadow}}, as: sme-bob}}
  - {{promote: {{item: second, to: active}}, as: sme-bob}}
  - {{promote: {{item: big-pool, to: shadow}}, as: sme-bob}}
  - {{promote: {{item: big-pool, to: active}}, as: sme-bob}}
  - open_case: {{id: INC-3, subjects: [api]}}
    at: +1d
  # 16: without an anchor the tie goes to the first written
  - recall: {{query: {QUERY!r}, subjects: [api], explain: true, record: false}}
    expect: {{order: [first, second], withheld: {{big-pool: applicability}}}}
  # 17: an anchor on INC-2 lifts the item written there
  - recall:
      query: {QUERY!r}
      subjects: [api]
      anchors: ["case:INC-2"]
      record: false
    expect: {{order: [second, first]}}
  # 18: an anchor with its own weight, on INC-1, keeps the first written first
  - recall:
      query: {QUERY!r}
      subjects: [api]
      anchors: [{{axis: case, id: INC-1, weight: 2}}]
      record: false
    expect: {{order: [first, second]}}
  # 19: limit 1 returns the first ranked, and not the other
  - recall: {{query: {QUERY!r}, subjects: [api], limit: 1, record: false}}
    expect: {{include: [first], exclude: [second]}}
  # 20: pinned, the item below the limit comes back, first
  - recall: {{query: {QUERY!r}, subjects: [api], limit: 1, pinned: [second], record: false}}
    expect: {{order: [second, first]}}
  # 21: with a budget one item fits: the pinned one is packed, the better ranked is not
  - recall:
      query: {QUERY!r}
      subjects: [api]
      limit: 1
      pinned: [second]
      budget: 100
    expect:
      order: [second, first]
      packed_include: [second]
      packed_exclude: [first]
      packed_within_budget: true
"""


def _run(text: str, pg_server_url: str, template_db: str) -> ScenarioResult:
    return run_scenario(
        parse_scenario(text, "anchors-and-pins.yaml"),
        path="anchors-and-pins.yaml",
        server_url=pg_server_url,
        template=template_db,
        embedder=recall.make_embedder("hashing"),
    )


def _without(text: str, piece: str) -> str:
    assert text.count(piece) == 1, piece
    return text.replace(piece, "")


def test_anchors_and_pins_scenario_passes(pg_server_url: str, template_db: str) -> None:
    res = _run(SCENARIO, pg_server_url, template_db)
    assert res.ok, [f.describe() for f in res.failures]
    tie, anchored = res.steps[16].result, res.steps[17].result
    assert tie["scores"]["first"] == tie["scores"]["second"]
    assert anchored["scores"]["second"] > anchored["scores"]["first"]
    assert res.steps[20].result["pinned"] == ["second"]
    assert res.steps[20].summary.endswith(": second (pinned), first")
    packed = res.steps[21].result["packed"]
    assert (packed["items"], packed["omitted"]) == (["second"], ["first"])


@pytest.mark.parametrize(
    ("piece", "step", "expectation"),
    [
        ('      anchors: ["case:INC-2"]\n', 17, "order"),
        (" pinned: [second],", 20, "order"),
        ("      pinned: [second]\n", 21, "packed_include"),
    ],
    ids=["anchor", "pinned", "pinned-packed"],
)
def test_without_the_anchor_or_the_pin_the_step_fails(
    pg_server_url: str, template_db: str, piece: str, step: int, expectation: str
) -> None:
    """The runner passes anchors and pinned to the recall: without them, the same
    expectations fail."""
    res = _run(_without(SCENARIO, piece), pg_server_url, template_db)
    failed = {(f.step_index, f.expectation) for f in res.failures}
    assert (step, expectation) in failed, [f.describe() for f in res.failures]
    assert {s for s, _ in failed} == {step}


def test_withheld_detail_is_the_doors_view_with_the_gates(
    pg_server_url: str, template_db: str
) -> None:
    res = _run(SCENARIO, pg_server_url, template_db)
    detail: dict[str, Any] = res.steps[16].result["withheld_detail"]["big-pool"]
    # the explain entry every door shows (no state for an applicability withholding),
    # and each gate's verdict, which caveat demo narrates
    assert set(detail) == {"id", "subject", "attribute", "text", "gate", "conditions", "gates"}
    assert detail["gate"] == "applicability"
    assert detail["gates"]["applicability"] is False
    assert [c["condition"] for c in detail["conditions"]] == ["config.pool.max eq 50"]


HEAD = SCENARIO[: SCENARIO.index("  - close_case: {id: INC-1")]


@pytest.mark.parametrize(
    ("step", "fragment"),
    [
        ("recall: {query: q, limit: 101}", "recall: limit: Input should be less than or equal"),
        ("recall: {query: q, budget: 100001}", "recall: budget: Input should be less than"),
        (
            "recall: {query: q, observations: [{subject: api, attribute: config.pool.max,"
            " value: [20]}]}",
            "recall: observations[0].value",
        ),
    ],
    ids=["limit", "budget", "observation"],
)
def test_what_the_request_model_refuses_is_invalid_input(
    pg_server_url: str, template_db: str, step: str, fragment: str
) -> None:
    """A recall step is built through the doors' request model: what it refuses fails the
    step with invalid_input (an expectable error), not a traceback."""
    res = _run(HEAD + f"  - {step}\n", pg_server_url, template_db)
    [failure] = res.failures
    assert failure.expectation == "error"
    assert str(failure.got).startswith("invalid_input: " + fragment), failure.got
    expectable = HEAD + f"  - {step}\n    expect: {{error: invalid_input}}\n"
    res = _run(expectable, pg_server_url, template_db)
    assert res.ok, [f.describe() for f in res.failures]


def test_a_pinned_item_whose_write_was_refused_fails_the_step(
    pg_server_url: str, template_db: str
) -> None:
    text = HEAD + (
        "  - write: {ref: bad, kind: fact, subject: api, attribute: x, object: 1,"
        " required: ['config.pool.max eq'], evidence: [E-1]}\n"
        "    expect: {outcome: rejected}\n"
        "  - recall: {query: q, pinned: [bad]}\n"
    )
    res = _run(text, pg_server_url, template_db)
    [failure] = res.failures
    assert (failure.expectation, failure.step_index) == ("error", 6)
    assert "'bad' names no stored item" in str(failure.got)
