"""Malformed scenarios raise one ScenarioError pointing at the offending line."""

from __future__ import annotations

from pathlib import Path

import pytest

from caveat.replay import load_scenario, parse_scenario
from predicates.errors import InputError, ScenarioError

# Seven lines; the first step of every case below is on line 9.
HEAD = """\
caveat_scenario: 1
name: broken
tenant: acme
start: 2026-03-01T09:00:00Z
principals:
  agent-ir: {role: agent, capabilities: [incidents]}
  sme-bob: {role: sme}
"""
WRITE = "{ref: a, kind: fact, subject: s, attribute: x, object: 1, evidence: [E]}"
ATTACH = "{item: a, evidence: E, stance: supports, strength: 0.5, source_kind: citation}"


def _attach(old: str, new: str) -> str:
    """A write of ``a`` (line 9), then an attach_evidence step (line 10) with ``old`` made
    ``new``."""
    return (
        HEAD
        + f"steps:\n  - write: {WRITE}\n  - attach_evidence: "
        + ATTACH.replace(old, new)
        + "\n"
    )


def _error(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(text, "broken.yaml")
    return info.value


CASES: list[tuple[str, str, int, str, str]] = [
    # id, text, line, the text the column must point at, a fragment of the reason
    (
        "unknown top-level key",
        HEAD + "colour: red\nsteps:\n  - audit_verify: {}\n",
        8,
        "colour",
        "unknown key 'colour'",
    ),
    (
        "unknown key inside a write",
        HEAD
        + "steps:\n  - write:\n      ref: a\n      kind: fact\n      subject: s\n"
        + "      attribute: x\n      object: 1\n      evidence: [E]\n      colour: red\n",
        16,
        "colour",
        "steps[0].write: unknown key 'colour'",
    ),
    (
        "refresh on a recall: replay cannot reach live systems",
        HEAD + "steps:\n  - recall: {query: x, subjects: [s], refresh: true}\n",
        9,
        "refresh",
        "steps[0].recall: replay cannot reach live systems: 'refresh' pulls from the fact sources",
    ),
    (
        "a refresh deadline on a recall: the same",
        HEAD + "steps:\n  - recall:\n      query: x\n      refresh_deadline_ms: 900\n",
        11,
        "refresh_deadline_ms",
        "replay cannot reach live systems",
    ),
    (
        "two action keys in one step",
        HEAD + "steps:\n  - evidence: {id: E}\n    open_case: {id: INC-1}\n",
        10,
        "open_case",
        "exactly one action, found 2: evidence, open_case",
    ),
    (
        "no action key",
        HEAD + "steps:\n  - audit_verify: {}\n  - at: +1h\n",
        10,
        "at",
        "a step needs one action key",
    ),
    (
        "unknown action",
        HEAD + "steps:\n  - audit_verify: {}\n  - recal: {query: x}\n",
        10,
        "recal",
        "unknown action 'recal'; did you mean 'recall'?",
    ),
    (
        "unknown step key beside an action",
        HEAD + "steps:\n  - audit_verify: {}\n    when: +1h\n",
        10,
        "when",
        "unknown key 'when'",
    ),
    (
        "bad offset",
        HEAD + "steps:\n  - audit_verify: {}\n  - audit_verify: {}\n    at: +12x\n",
        11,
        "+12x",
        "'+12x' is not an offset",
    ),
    (
        "negative offset",
        HEAD + "steps:\n  - audit_verify: {}\n    at: -5m\n",
        10,
        "-5m",
        "never runs backwards",
    ),
    (
        "clock running backwards",
        HEAD
        + "steps:\n  - audit_verify: {}\n    at: +1d\n"
        + "  - audit_verify: {}\n    at: 2026-03-01T12:00:00Z\n",
        12,
        "2026",
        "2026-03-01T12:00:00Z is before the previous step's time 2026-03-02T09:00:00Z",
    ),
    (
        "step before start",
        HEAD + "steps:\n  - audit_verify: {}\n    at: '2026-02-28T09:00:00Z'\n",
        10,
        "'2026",
        "never runs backwards",
    ),
    (
        "at of the wrong type",
        HEAD + "steps:\n  - audit_verify: {}\n    at: 30\n",
        10,
        "30",
        "expected a UTC time",
    ),
    (
        "time without a timezone",
        HEAD + "steps:\n  - audit_verify: {}\n    at: 2026-03-02 09:00:00\n",
        10,
        "2026",
        "has no timezone",
    ),
    (
        "unknown principal in as",
        HEAD + "steps:\n  - audit_verify: {}\n    as: sme-alice\n",
        10,
        "sme-alice",
        "unknown principal 'sme-alice'",
    ),
    (
        "ref used before its write",
        HEAD + f"steps:\n  - verify: {{item: a}}\n    as: sme-bob\n  - write: {WRITE}\n",
        9,
        "a}",
        "ref 'a' is used before the write that defines it (line 11)",
    ),
    (
        "ref never defined",
        HEAD + f"steps:\n  - write: {WRITE}\n  - revoke: {{item: b, reason: wrong}}\n",
        10,
        "b,",
        "unknown ref 'b'",
    ),
    (
        "ref in a recall expectation",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q}}\n    expect:\n"
        "      include: [a, ghost]\n",
        12,
        "ghost",
        "steps[1].expect.include[1]: unknown ref 'ghost'",
    ),
    (
        "ref as an expect_state key",
        HEAD + "steps:\n  - expect_state:\n      ghost: active\n",
        10,
        "ghost",
        "unknown ref 'ghost'",
    ),
    (
        "write derived from itself",
        HEAD
        + "steps:\n  - write: {ref: a, kind: fact, subject: s, attribute: x, object: 1,"
        + " evidence: [E], derived_from: [a]}\n",
        9,
        "a]}",
        "cannot name its own ref",
    ),
    (
        "duplicate ref",
        HEAD + f"steps:\n  - write: {WRITE}\n  - write: {WRITE}\n",
        10,
        "a,",
        "ref 'a' is already defined by the write at line 9",
    ),
    (
        "withheld without explain",
        HEAD + "steps:\n  - write: " + WRITE + "\n  - recall: {query: q}\n    expect:\n"
        "      exclude: [a]\n      withheld: {a: applicability}\n",
        13,
        "withheld",
        "'withheld' needs explain: true",
    ),
    (
        "YAML syntax error",
        HEAD + "steps:\n  - recall: {query: q\n  - audit_verify: {}\n",
        10,
        ": {}",
        "invalid YAML",
    ),
    (
        "tab indentation",
        HEAD + "steps:\n\t- audit_verify: {}\n",
        9,
        "\t",
        "invalid YAML",
    ),
    (
        "duplicate key",
        HEAD + "name: again\nsteps:\n  - audit_verify: {}\n",
        8,
        "name",
        'duplicate key "name"',
    ),
    (
        "wrong type: limit",
        HEAD + 'steps:\n  - recall:\n      query: q\n      limit: "ten"\n',
        11,
        '"ten',
        "steps[0].recall.limit: expected an integer, got str 'ten'",
    ),
    (
        "wrong type: explain",
        HEAD + "steps:\n  - recall: {query: q, explain: yes}\n",
        9,
        "yes",
        "expected true or false, got str 'yes'",
    ),
    (
        "missing required key in a write",
        HEAD + "steps:\n  - write:\n      ref: a\n      kind: fact\n      subject: s\n"
        "      attribute: x\n      object: 1\n",
        9,
        "write",
        "steps[0].write: missing required key 'evidence'",
    ),
    (
        "missing required top-level key",
        HEAD.replace("tenant: acme\n", "") + "steps:\n  - audit_verify: {}\n",
        1,
        "caveat_scenario",
        "missing required key 'tenant'",
    ),
    (
        "missing value in an observation",
        HEAD + "steps:\n  - observe:\n      - {subject: s, attribute: a, value: 1}\n"
        "      - {subject: s, attribute: b}\n",
        11,
        "{subject",
        "steps[0].observe[1]: missing required key 'value'",
    ),
    (
        "unsupported format version",
        HEAD.replace("caveat_scenario: 1", "caveat_scenario: 2") + "steps: []\n",
        1,
        "2",
        "unsupported format 2",
    ),
    (
        "format version as a boolean",
        HEAD.replace("caveat_scenario: 1", "caveat_scenario: true") + "steps: []\n",
        1,
        "true",
        "unsupported format True",
    ),
    (
        "no format version",
        "name: x\n",
        1,
        "name",
        "missing required key 'caveat_scenario'",
    ),
    ("not a mapping", "- a\n- b\n", 1, "- a", "a scenario is a YAML mapping"),
    ("empty document", "", 1, "", "got null"),
    ("no steps", HEAD + "steps: []\n", 8, "[]", "steps: must not be empty"),
    (
        "step is not a mapping",
        HEAD + "steps:\n  - audit_verify\n",
        9,
        "audit_verify",
        "a step is a mapping",
    ),
    (
        "expectation of another action",
        HEAD + "steps:\n  - evidence: {id: E}\n    expect: {outcome: accepted}\n",
        10,
        "outcome",
        "'outcome' is not an expectation of evidence steps; they may expect: error",
    ),
    (
        "recall expectation on a write",
        HEAD + f"steps:\n  - write: {WRITE}\n    expect:\n      outcome: accepted\n"
        "      include: [a]\n",
        12,
        "include",
        "'include' is not an expectation of write steps",
    ),
    (
        "error with other expectations",
        HEAD + f"steps:\n  - write: {WRITE}\n    expect: {{error: forbidden, outcome: rejected}}\n",
        10,
        "outcome",
        "'error' says the step fails",
    ),
    (
        "code from another gate",
        HEAD + f"steps:\n  - write: {WRITE}\n    expect: {{outcome: rejected, gate: G1,"
        " code: evidence_missing}\n",
        10,
        "G1,",
        "code evidence_missing is raised by G3, not G1",
    ),
    (
        "code with an accepted outcome",
        HEAD + f"steps:\n  - write: {WRITE}\n    expect: {{outcome: accepted,"
        " code: evidence_missing}\n",
        10,
        "code",
        "'code' names a rejection, but the outcome is accepted",
    ),
    (
        "state of a rejected write",
        HEAD + f"steps:\n  - write: {WRITE}\n    expect: {{outcome: rejected, state: case}}\n",
        10,
        "state",
        "'state' is the state of a new item",
    ),
    (
        "unknown gate",
        HEAD + f"steps:\n  - write: {WRITE}\n    expect: {{outcome: rejected, gate: G5}}\n",
        10,
        "G5",
        "expect.gate: unknown gate 'G5'; expected one of: G1, G2, G3, G4",
    ),
    (
        "unknown withheld gate",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q, explain: true}}\n"
        "    expect: {withheld: {a: relevance}}\n",
        11,
        "relevance",
        "expect.withheld.a: unknown gate 'relevance'; expected one of: tenant_scope, capability,",
    ),
    (
        "include and exclude the same ref",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q}}\n"
        "    expect: {include: [a], exclude: [a]}\n",
        11,
        "a]}",
        "cannot be in both 'include' and 'exclude'",
    ),
    (
        "count above the limit",
        HEAD + "steps:\n  - recall: {query: q, limit: 3}\n    expect: {count: 5}\n",
        10,
        "5",
        "can never come back from a recall with limit 3",
    ),
    (
        "context check of an item not checked",
        HEAD + f"steps:\n  - write: {WRITE}\n  - write: {WRITE.replace('ref: a', 'ref: b')}\n"
        "  - check_context: {items: [a]}\n    expect: {usable: [a], dropped: [b]}\n",
        12,
        "b]",
        "'b' is not among the items checked",
    ),
    (
        "context check reason for an item not checked",
        HEAD + f"steps:\n  - write: {WRITE}\n  - write: {WRITE.replace('ref: a', 'ref: b')}\n"
        "  - check_context: {items: [a]}\n    expect: {reasons: {b: applicability}}\n",
        12,
        "b:",
        "reasons: 'b' is not among the items checked",
    ),
    (
        "context check reason for a usable item",
        HEAD + f"steps:\n  - write: {WRITE}\n"
        "  - check_context: {items: [a]}\n    expect: {usable: [a], reasons: {a: revoked}}\n",
        11,
        "a:",
        "'a' cannot be both usable and dropped for a reason",
    ),
    (
        "unknown state",
        HEAD + f"steps:\n  - write: {WRITE}\n  - expect_state: {{a: alive}}\n",
        10,
        "alive",
        "expect_state.a: unknown state 'alive'; did you mean 'active'?",
    ),
    (
        "misspelt state",
        HEAD + f"steps:\n  - write: {WRITE}\n  - expect_state: {{a: need_reverification}}\n",
        10,
        "need_reverification",
        "steps[1].expect_state.a: unknown state 'need_reverification'; "
        "did you mean 'needs_reverification'?",
    ),
    (
        "misspelt state of a write",
        HEAD + f"steps:\n  - write: {WRITE}\n    expect: {{outcome: accepted, state: shadw}}\n",
        10,
        "shadw",
        "steps[0].expect.state: unknown state 'shadw'; did you mean 'shadow'?",
    ),
    (
        "misspelt withheld gate",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q, explain: true}}\n"
        "    expect: {withheld: {a: aplicability}}\n",
        11,
        "aplicability",
        "expect.withheld.a: unknown gate 'aplicability'; did you mean 'applicability'?",
    ),
    (
        "misspelt reason code",
        HEAD + f"steps:\n  - write: {WRITE}\n"
        "    expect: {outcome: rejected, code: subject_unresolvd}\n",
        10,
        "subject_unresolvd",
        "steps[0].expect.code: unknown code 'subject_unresolvd'; "
        "did you mean 'subject_unresolved'?",
    ),
    (
        "misspelt error code",
        HEAD + f"steps:\n  - write: {WRITE}\n  - revoke: {{item: a, reason: r}}\n"
        "    expect: {error: not_foud}\n",
        11,
        "not_foud",
        "steps[1].expect.error: unknown code 'not_foud'; did you mean 'not_found'?",
    ),
    (
        "malformed scope",
        HEAD + "steps:\n  - write:\n      ref: a\n      kind: fact\n      subject: s\n"
        "      attribute: x\n      object: 1\n      evidence: [E]\n      scope: INC-1\n",
        16,
        "INC-1",
        """expected "axis:id" (e.g. "case:INC-902"), got 'INC-1'""",
    ),
    (
        "malformed duration",
        HEAD + "schema:\n  - {attribute: a.b, type: float, max_age: 15 min}\n"
        "steps:\n  - audit_verify: {}\n",
        9,
        "15 min",
        "'15 min' is not a duration",
    ),
    (
        "advance by a number",
        HEAD + "steps:\n  - advance: 12\n",
        9,
        "12",
        "expected a duration such as 30s",
    ),
    (
        "unknown schema type",
        HEAD + "schema:\n  - {attribute: a.b, type: integer}\nsteps:\n  - audit_verify: {}\n",
        9,
        "integer",
        "expected a type: int, float",
    ),
    (
        "attribute declared twice",
        HEAD + "schema:\n  - {attribute: a.b, type: int}\n  - {attribute: a.b, type: float}\n"
        "steps:\n  - audit_verify: {}\n",
        10,
        "a.b",
        "'a.b' is declared twice",
    ),
    (
        "undeclared topology target",
        HEAD + "entities:\n  - {id: api, kind: service, depends_on: [dbb]}\n"
        "  - {id: db, kind: database}\nsteps:\n  - audit_verify: {}\n",
        9,
        "dbb",
        "'dbb' is not a declared entity",
    ),
    (
        "unknown role",
        HEAD + "  root: {role: god}\nsteps:\n  - audit_verify: {}\n",
        8,
        "god",
        "principals.root.role: expected 'agent', 'sme', 'admin' or 'source'",
    ),
    (
        "min_agreement out of range",
        HEAD + "policy:\n  shadow: {min_agreement: 1.5}\nsteps:\n  - audit_verify: {}\n",
        9,
        "1.5",
        "policy.shadow.min_agreement",
    ),
    (
        "policy writes",
        HEAD + "policy: {writes: disabled}\nsteps:\n  - audit_verify: {}\n",
        8,
        "disabled",
        "expected 'on', 'off' or 'incognito'",
    ),
    (
        "event principal not declared",
        HEAD + "steps:\n  - event: {type: authorisation, subjects: [], principal: eve}\n",
        9,
        "eve}",
        "steps[0].event.principal: unknown principal 'eve'",
    ),
    (
        "non-string mapping key",
        HEAD + "steps:\n  - event: {type: deploy, subjects: [a], changes: {1: 2}}\n",
        9,
        "1:",
        "steps[0].event.changes.1: mapping keys must be strings, got 1",
    ),
    (
        "YAML tag",
        HEAD + "steps:\n  - audit_verify: !custom x\n",
        9,
        "!custom",
        "unsupported YAML value (!custom); use plain data",
    ),
    (
        "action without a value",
        HEAD + "steps:\n  - open_case:\n  - audit_verify: {}\n",
        9,
        "open_case",
        "steps[0].open_case: expected a mapping, got null",
    ),
    (
        "a key for an action that takes none",
        HEAD + "steps:\n  - audit_verify: {strict: true}\n",
        9,
        "strict",
        "unknown key 'strict'; it takes no keys",
    ),
    (
        "misspelt key inside a list item",
        HEAD + "steps:\n  - observe: [{subject: a, attribute: b, value: 1, sorce: x}]\n",
        9,
        "sorce",
        "steps[0].observe[0]: unknown key 'sorce'; did you mean 'source'?",
    ),
    (
        "a diff bound in the future",
        HEAD + "steps:\n  - diff: {from: -1d, to: 2026-03-01T10:00:00Z}\n",
        9,
        "2026-03-01T10",
        "steps[0].diff.to: 2026-03-01T10:00:00Z is after the step's time"
        " 2026-03-01T09:00:00Z; a diff cannot see the future",
    ),
    (
        "a diff that runs backwards",
        HEAD + "steps:\n  - diff:\n      from: -1h\n      to: -2h\n",
        10,
        "-1h",
        "steps[0].diff.from: 2026-03-01T08:00:00Z is after to (2026-03-01T07:00:00Z)",
    ),
    (
        "a diff offset forwards",
        HEAD + "steps:\n  - diff: {from: +1d, to: -0s}\n",
        9,
        "+1d",
        "'+1d' is in the future; a diff looks back: write -DURATION",
    ),
    (
        "a diff without to",
        HEAD + "steps:\n  - diff: {from: -1d}\n",
        9,
        "diff",
        "steps[0].diff: missing required key 'to'",
    ),
    (
        "a diff cause that is not one",
        HEAD
        + "steps:\n  - write: "
        + WRITE.replace("evidence: [E]", "evidence: [], scope: tenant")
        + "\n  - diff: {from: -1d, to: -0s}\n    expect: {causes: {a: deploy}}\n",
        11,
        "deploy",
        "expected 'transition', 'supersession', 'fact_change' or 'validity_window'",
    ),
    (
        "a ref that both became and stopped",
        HEAD
        + "steps:\n  - write: "
        + WRITE
        + "\n  - diff: {from: -1d, to: -0s}\n    expect:\n      became: [a]\n"
        + "      stopped: [a]\n",
        13,
        "a]",
        "ref 'a' cannot be in both 'became' and 'stopped'",
    ),
    (
        "a changed ref unknown to the caller",
        HEAD
        + "steps:\n  - write: "
        + WRITE
        + "\n  - diff: {from: -1d, to: -0s}\n    expect:\n      causes: {a: transition}\n"
        + "      unknown_to_caller: [a]\n",
        13,
        "a]",
        "ref 'a' cannot be in both 'causes' and 'unknown_to_caller'",
    ),
    (
        "an unknown ref in a diff expectation",
        HEAD + "steps:\n  - diff: {from: -1d, to: -0s}\n    expect: {became: [ghost]}\n",
        10,
        "ghost",
        "unknown ref 'ghost'",
    ),
    (
        "attach_evidence strength above 1",
        _attach("0.5", "1.5"),
        10,
        "1.5",
        "steps[1].attach_evidence.strength: expected less than or equal to 1, got float 1.5",
    ),
    (
        "attach_evidence strength as a string",
        _attach("0.5", "'high'"),
        10,
        "'high'",
        "steps[1].attach_evidence.strength: expected a number, got str 'high'",
    ),
    (
        "attach_evidence unknown stance",
        _attach("supports", "agrees"),
        10,
        "agrees",
        "steps[1].attach_evidence.stance: expected 'supports' or 'refutes', got str 'agrees'",
    ),
    (
        "attach_evidence unknown source kind",
        _attach("citation", "hunch"),
        10,
        "hunch",
        "expected 'human_confirm', 'citation', 'repeat_observation' or 'agent_judge'",
    ),
    (
        "attach_evidence without a strength",
        _attach(" strength: 0.5,", ""),
        10,
        "attach_evidence",
        "steps[1].attach_evidence: missing required key 'strength'",
    ),
    (
        "attach_evidence to an unknown ref",
        _attach("item: a", "item: ghost"),
        10,
        "ghost",
        "steps[1].attach_evidence.item: unknown ref 'ghost'",
    ),
    (
        "attach_evidence before the write",
        HEAD + f"steps:\n  - attach_evidence: {ATTACH}\n  - write: {WRITE}\n",
        9,
        "a,",
        "ref 'a' is used before the write that defines it (line 10)",
    ),
    (
        "a recall expectation on attach_evidence",
        HEAD + f"steps:\n  - write: {WRITE}\n  - attach_evidence: {ATTACH}\n"
        "    expect: {include: [a]}\n",
        11,
        "include",
        "'include' is not an expectation of attach_evidence steps; they may expect: error",
    ),
    (
        "negative budget",
        HEAD + "steps:\n  - recall: {query: q, budget: -5}\n",
        9,
        "-5",
        "steps[0].recall.budget: expected greater than or equal to 0, got int -5",
    ),
    (
        "budget as a string",
        HEAD + "steps:\n  - recall: {query: q, budget: '200'}\n",
        9,
        "'200'",
        "steps[0].recall.budget: expected an integer, got str '200'",
    ),
    (
        "min_confidence above 1",
        HEAD + "steps:\n  - recall:\n      query: q\n      min_confidence: 1.5\n",
        11,
        "1.5",
        "steps[0].recall.min_confidence: expected less than or equal to 1, got float 1.5",
    ),
    (
        "packed_include without a budget",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q}}\n"
        "    expect:\n      include: [a]\n      packed_include: [a]\n",
        13,
        "packed_include",
        "steps[1].expect: 'packed_include' needs budget: TOKENS on the recall",
    ),
    (
        "packed_exclude without a budget",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q, limit: 3}}\n"
        "    expect: {packed_exclude: [a]}\n",
        11,
        "packed_exclude",
        "'packed_exclude' needs budget: TOKENS on the recall",
    ),
    (
        "packed_within_budget without a budget",
        HEAD
        + "steps:\n  - recall: {query: q}\n    expect: {count: 0, packed_within_budget: true}\n",
        10,
        "packed_within_budget",
        "'packed_within_budget' needs budget: TOKENS on the recall",
    ),
    (
        "packed_within_budget false",
        HEAD + "steps:\n  - recall: {query: q, budget: 10}\n"
        "    expect: {packed_within_budget: false}\n",
        10,
        "false",
        "steps[0].expect.packed_within_budget: only true can be expected"
        " (leave the key out), got false",
    ),
    (
        "a ref both packed and not",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q, budget: 50}}\n"
        "    expect:\n      packed_include: [a]\n      packed_exclude: [a]\n",
        13,
        "a]",
        "ref 'a' cannot be in both 'packed_include' and 'packed_exclude'",
    ),
    (
        "a packed ref excluded from the result",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q, budget: 50}}\n"
        "    expect:\n      packed_include: [a]\n      exclude: [a]\n",
        13,
        "a]",
        "ref 'a' cannot be in both 'packed_include' and 'exclude'",
    ),
    (
        "an unknown ref in packed_exclude",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q, budget: 50}}\n"
        "    expect: {packed_exclude: [a, ghost]}\n",
        11,
        "ghost",
        "steps[1].expect.packed_exclude[1]: unknown ref 'ghost'",
    ),
    (
        "an anchor without a colon",
        HEAD + "steps:\n  - recall: {query: q, anchors: [case:INC-1, INC-2]}\n",
        9,
        "INC-2",
        'steps[0].recall.anchors[1]: expected "axis:id" (e.g. "case:INC-902"), got \'INC-2\'',
    ),
    (
        "an anchor that is neither text nor a mapping",
        HEAD + "steps:\n  - recall: {query: q, anchors: [7]}\n",
        9,
        "7",
        'steps[0].recall.anchors[0]: expected "axis:id" (e.g. "service:payment-api")'
        " or {axis, id, weight?}, got int 7",
    ),
    (
        "an anchor without its id",
        HEAD + "steps:\n  - recall:\n      query: q\n      anchors: [{axis: case}]\n",
        11,
        "{axis",
        "steps[0].recall.anchors[0]: missing required key 'id'",
    ),
    (
        "an anchor weight out of bounds",
        HEAD + "steps:\n  - recall:\n      query: q\n"
        "      anchors: [{axis: case, id: INC-1, weight: 3}]\n",
        11,
        "3}",
        "steps[0].recall.anchors[0].weight: expected less than or equal to 2, got int 3",
    ),
    (
        "an unknown key in an anchor",
        HEAD + "steps:\n  - recall:\n      query: q\n"
        "      anchors: [{axis: case, id: INC-1, boost: 2}]\n",
        11,
        "boost",
        "steps[0].recall.anchors[0]: unknown key 'boost'; expected one of: axis, id, weight",
    ),
    (
        "anchors not a list",
        HEAD + "steps:\n  - recall: {query: q, anchors: case:INC-1}\n",
        9,
        "case:INC-1",
        "steps[0].recall.anchors: expected a list, got str 'case:INC-1'",
    ),
    (
        "an unknown pinned ref",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q, pinned: [a, ghost]}}\n",
        10,
        "ghost",
        "steps[1].recall.pinned[1]: unknown ref 'ghost'; refs are defined by earlier write steps",
    ),
    (
        "a pinned ref before its write",
        HEAD + f"steps:\n  - recall: {{query: q, pinned: [a]}}\n  - write: {WRITE}\n",
        9,
        "a]",
        "steps[0].recall.pinned[0]: ref 'a' is used before the write that defines it (line 10)",
    ),
    (
        "a pinned item that is not a ref",
        HEAD + f"steps:\n  - write: {WRITE}\n  - recall: {{query: q, pinned: [1]}}\n",
        10,
        "1]",
        "steps[1].recall.pinned[0]: expected a string, got int 1",
    ),
    (
        "a docs step without its text",
        HEAD + "steps:\n  - docs: {id: runbooks/a.md, uri: x}\n",
        9,
        "docs",
        "steps[0].docs: missing required key 'text'",
    ),
    (
        "a docs step's readers that are not a list",
        HEAD + "steps:\n  - docs:\n      id: r.md\n      text: '# A'\n      readers: ops\n",
        12,
        "ops",
        "steps[0].docs.readers",
    ),
    (
        "an unknown key in a docs step",
        HEAD + "steps:\n  - docs: {id: r.md, text: '# A', colour: red}\n",
        9,
        "colour",
        "steps[0].docs: unknown key 'colour'",
    ),
    (
        "knowledge_include that is not a list",
        HEAD
        + "steps:\n  - recall: {query: q, sources: [knowledge]}\n"
        + "    expect: {knowledge_include: runbooks/a.md}\n",
        10,
        "runbooks",
        "knowledge_include",
    ),
    (
        "knowledge_include on a recall of memory alone",
        HEAD + "steps:\n  - recall: {query: q}\n    expect: {knowledge_include: [r.md]}\n",
        10,
        "knowledge_include",
        "'knowledge_include' needs sources with knowledge on the recall",
    ),
    (
        "a document both included and excluded",
        HEAD
        + "steps:\n  - recall: {query: q, sources: [knowledge]}\n"
        + "    expect: {knowledge_include: [r.md], knowledge_exclude: [s.md, r.md]}\n",
        10,
        "r.md]}",
        "document 'r.md' cannot be in both 'knowledge_include' and 'knowledge_exclude'",
    ),
    (
        "impossible date",
        HEAD.replace("2026-03-01T09", "2026-02-30T09"),
        4,
        "2026",
        "invalid timestamp",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "token", "fragment"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_malformed_scenario(text: str, line: int, token: str, fragment: str) -> None:
    source_line = (text.splitlines() or [""])[line - 1]
    assert token in source_line, "bad test: the token is not on that line"
    column = source_line.index(token) + 1
    error = _error(text)
    assert fragment in error.detail["reason"]
    assert (error.detail["line"], error.detail["column"]) == (line, column), str(error)
    assert str(error) == f"broken.yaml:{line}:{column}: {error.detail['reason']}"


def test_error_is_the_scenario_invalid_input_error() -> None:
    error = _error(HEAD + "colour: red\nsteps:\n  - audit_verify: {}\n")
    assert isinstance(error, InputError)
    assert error.code == "scenario_invalid"
    assert error.to_dict() == {
        "code": "scenario_invalid",
        "message": str(error),
        "file": "broken.yaml",
        "line": 8,
        "column": 1,
        "reason": error.detail["reason"],
    }
    assert "\n" not in str(error)


def test_first_problem_in_the_file_is_reported() -> None:
    text = HEAD + ("steps:\n  - recall:\n      query: 1\n      limit: ten\n      explain: maybe\n")
    error = _error(text)
    assert error.detail["line"] == 10
    assert "query" in error.detail["reason"]


def test_load_scenario_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ScenarioError) as info:
        load_scenario(missing)
    assert str(info.value).startswith(f"{missing}:1:1: cannot read scenario file")


def test_load_scenario_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(HEAD.encode() + "description: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert (info.value.detail["line"], info.value.detail["column"]) == (8, 17)
    assert "not UTF-8" in info.value.detail["reason"]


def test_load_scenario_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(HEAD + "steps:\n  - audit_verify: {}\n    as: nobody\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}:10:9: steps[0].as: unknown principal")
    assert info.value.detail["file"] == str(path)
