"""Whatever the text, parse_scenario returns a Scenario or raises ScenarioError."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caveat.replay import ACTION_MODELS, Scenario, parse_scenario
from predicates.errors import ScenarioError

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
BUNDLED = [p.read_text() for p in sorted(SCENARIOS.glob("*.yaml"))]
ERROR = re.compile(r"^f\.yaml:(\d+):(\d+): \S.*$", re.DOTALL)

VOCABULARY = sorted(
    {
        *ACTION_MODELS,
        *(name for model in ACTION_MODELS.values() for name in model.model_fields),
        "caveat_scenario", "name", "tenant", "start", "principals", "steps", "schema",
        "entities", "policy", "role", "at", "as", "expect", "outcome", "include", "withheld",
        "explain", "ref", "item", "+12d", "agent", "sme", "2026-03-01T09:00:00Z", "15m",
    }
)  # fmt: skip
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(VOCABULARY),
    st.text(max_size=12),
)
DATA = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(VOCABULARY) | st.text(max_size=6), children, max_size=5),
    ),
    max_leaves=30,
)


def _check(text: str) -> None:
    try:
        result = parse_scenario(text, "f.yaml")
    except ScenarioError as error:
        match = ERROR.match(str(error))
        assert match is not None, str(error)
        line, column = int(match[1]), int(match[2])
        assert line >= 1 and column >= 1
        assert line <= text.count("\n") + text.count("\r") + 2
        assert error.code == "scenario_invalid"
        return
    assert isinstance(result, Scenario)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text(text: str) -> None:
    _check(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=":-[]{},&*!|>'\"#?\n\t %@`abc123", max_size=80))
def test_yaml_punctuation(text: str) -> None:
    _check(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DATA)
def test_arbitrary_documents(data: object) -> None:
    _check(json.dumps(data))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    header=st.fixed_dictionaries(
        {
            "caveat_scenario": st.just(1),
            "name": st.just("n"),
            "tenant": st.just("t"),
            "start": st.sampled_from(["2026-03-01T09:00:00Z", "2026-03-01", 5]),
            "principals": st.just({"a": {"role": "agent"}}),
        }
    ),
    steps=st.lists(
        st.dictionaries(st.sampled_from(VOCABULARY), DATA, min_size=1, max_size=3),
        min_size=1,
        max_size=4,
    ),
)
def test_arbitrary_steps(header: dict[str, object], steps: list[object]) -> None:
    _check(json.dumps({**header, "steps": steps}))


@settings(max_examples=300, deadline=None)
@given(
    source=st.sampled_from(BUNDLED),
    where=st.floats(min_value=0, max_value=1, exclude_max=True),
    cut=st.integers(min_value=0, max_value=40),
    insert=st.text(alphabet=":-[]{} \n#abc+12dxs'\"", max_size=6),
)
def test_mutated_bundled_scenarios(source: str, where: float, cut: int, insert: str) -> None:
    at = int(where * len(source))
    _check(source[:at] + insert + source[at + cut :])


@settings(max_examples=200, deadline=None)
@given(source=st.sampled_from(BUNDLED), data=st.data())
def test_bundled_scenarios_without_one_line(source: str, data: st.DataObject) -> None:
    lines = source.splitlines(keepends=True)
    drop = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    _check("".join(lines[:drop] + lines[drop + 1 :]))
