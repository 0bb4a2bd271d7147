"""The framework recipes of docs/agents.md (examples/), run with each framework's own
scripted model against a live server on loopback, and checked against what landed in
caveat: the context the model saw, the context guard dropping an item an SME revoked
between two model calls, the record of use, the citation, the proposal and the close.

The OpenAI Agents SDK example runs here, in this interpreter (``openai-agents`` is in
the ``dev`` extra: it works with the MCP SDK 2.x). The LangGraph example runs in
``.venv-examples`` (``make examples-venv``, a prerequisite of ``make unit``):
``langchain-mcp-adapters`` requires ``mcp<2``, which caveat's server cannot share an
interpreter with; the two talk MCP over streamable HTTP, which does not care.
``CAVEAT_EXAMPLES_PYTHON`` names another interpreter for it. Without one the test
fails, saying how to build it: it is never skipped.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import sqlalchemy as sa

import lifecycle
from caveat import app as use
from tests.caveat._doors import QUERY, precedent
from tests.caveat.test_http import Server, serving
from tests.conftest import ADMIN

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
POOL = {"subject": "payment-api", "attribute": "config.connection_pool.max", "value": 20}
PRECEDENT_TEXT = "Payment API pool exhausted at max 20; a restart restored it."
LESSON = {
    "kind": "episode",
    "subject": "payment-api",
    "attribute": "pool_exhausted_again",
    "object": "E-1",
    "required": ["config.connection_pool.max eq 20"],
    "excluded": [],
    "evidence": ["E-1"],
    "epistemic": "observation",
    "text": "The pool was exhausted again at max 20; the restart did not hold.",
}
#: A proposal the write gate refuses: it cites no evidence.
UNSUPPORTED = {**LESSON, "attribute": "pool_too_small", "evidence": [], "text": "A guess."}


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


def _landed(s: Server, case: str) -> dict[str, Any]:
    """What the store holds of the case, read as the admin."""
    cited = use.list_citations(s.rt, ADMIN, lifecycle.CitationFilter(case_id=case)).items
    with s.rt.transaction() as tx:
        usage = tx.execute(sa.text("SELECT item_id, uses FROM item_usage")).all()
        entered = tx.execute(sa.text("SELECT case_id, item_id, via FROM case_context")).all()
    closes = use.audit_entries(s.rt, ADMIN, action="close_case")
    gated = [
        e
        for e in use.audit_entries(s.rt, ADMIN, by="agent-ir")
        if e.action in {"applied", "rejected"}
    ]
    return {
        "cited": cited,
        "usage": usage,
        "entered": entered,
        "gated": gated,
        "closes": closes,
    }


def _check_the_store(s: Server, case: str, item_id: int) -> None:
    landed = _landed(s, case)
    [citation] = landed["cited"]
    assert (citation.item_id, citation.influence, citation.cited_by) == (
        item_id,
        "decisive",
        "agent-ir",
    )
    assert citation.rationale and "pool" in citation.rationale
    # record_use: the precedent entered the case's context by recall; its uses count
    # the recorded use and the citation
    assert [tuple(r) for r in landed["usage"]] == [(item_id, 2)]
    assert (case, item_id, "recall") in [tuple(r) for r in landed["entered"]]
    # the proposals through the write gate: the lesson written, the unsupported one refused
    accepted, refused = landed["gated"]
    assert [(e.action, e.code) for e in (accepted, refused)] == [
        ("applied", "accepted"),
        ("rejected", "evidence_missing"),
    ]
    lesson = use.item(s.rt, ADMIN, accepted.item_id)
    assert (lesson.text, lesson.state, lesson.scope_id) == (LESSON["text"], "case", case)
    assert [(r.actor, r.code) for r in landed["closes"]] == [("agent-ir", "confirmed")]
    # the guard's answer, asked again now: the precedent is revoked
    check = use.check_context(s.rt, ADMIN, [item_id], case_id=case)
    assert check.dropped == {item_id: "revoked"}


# --- OpenAI Agents SDK ---------------------------------------------------------------


def _scripted_openai(turns: list[list[Any]]) -> Any:
    """A scripted ``agents.Model``: each call answers the next turn and keeps its input
    (the SDK's own FakeModel lives in its tests, not in the package)."""
    from agents import Model, ModelResponse, Usage

    class Scripted(Model):
        def __init__(self) -> None:
            self.seen: list[str] = []
            self.tools: list[str] = []

        async def get_response(
            self,
            system_instructions: Any,
            input: Any,
            model_settings: Any,
            tools: Any,
            *args: Any,
            **kwargs: Any,
        ) -> Any:
            self.seen.append(f"{system_instructions}\n{json.dumps(input, default=str)}")
            self.tools = sorted(t.name for t in tools)
            return ModelResponse(output=turns[len(self.seen) - 1], usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    return Scripted()


def _tool_call(n: int, name: str, args: dict[str, Any]) -> Any:
    from openai.types.responses import ResponseFunctionToolCall

    return ResponseFunctionToolCall(
        type="function_call", call_id=f"call-{n}", name=name, arguments=json.dumps(args)
    )


def _say(text: str) -> Any:
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    return ResponseOutputMessage(
        id="msg-1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def test_the_openai_agents_recipe_cites_proposes_and_drops_a_revoked_item(db_url: str) -> None:
    from agents import RunHooks

    example = _example("openai_agents_incident_agent")
    case = "INC-OA"
    with serving(db_url) as s:
        item_id = precedent(s.rt)
        cite = {
            "item": item_id,
            "case": case,
            "influence": "decisive",
            "rationale": "the same pool max, the same exhaustion",
        }
        model = _scripted_openai(
            [
                [_tool_call(1, "cite", cite)],
                [_tool_call(2, "propose", {"case": case, "proposals": [LESSON, UNSUPPORTED]})],
                [_say("Restarted payment-api; proposed the lesson.")],
            ]
        )

        class SmeRevokes(RunHooks[Any]):
            """An SME revokes the precedent right after the agent cited it."""

            async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
                if tool.name == "cite":
                    await asyncio.to_thread(use.revoke, s.rt, ADMIN, item_id, reason="wrong")

        incident = example.Incident(case, QUERY, ["payment-api"], [POOL])
        run = asyncio.run(
            example.run_incident(
                model, incident, url=f"{s.base}/mcp", token=s.agent, hooks=SmeRevokes()
            )
        )
        _check_the_store(s, case, item_id)
    assert (run.recalled, run.used) == ([item_id], [item_id])
    assert model.tools == ["cite", "explain", "observe", "propose"]
    first, second, third = model.seen
    assert PRECEDENT_TEXT in first and f"[{item_id}]" in first
    assert PRECEDENT_TEXT not in second and PRECEDENT_TEXT not in third
    assert "evidence_missing" in third  # the gate's refusal reached the model
    assert [c["usable"] for c in run.checks] == [[item_id], [], []]
    assert run.checks[1]["dropped"] == {str(item_id): "revoked"}
    assert run.context == {}
    assert run.answer == "Restarted payment-api; proposed the lesson."
    assert run.closed is not None and run.closed["status"] == "closed"


def test_the_openai_agents_recipe_stops_on_a_refusal(db_url: str) -> None:
    """A refused call of the loop's own stops it with caveat's code (an unknown subject)."""
    example = _example("openai_agents_incident_agent")
    with serving(db_url) as s:
        bad = example.Incident("INC-X", QUERY, ["payment-api"], [{**POOL, "value": "twenty"}])
        with pytest.raises(example.CaveatRefusal, match=r"^fact_type_mismatch: "):
            asyncio.run(
                example.run_incident(_scripted_openai([]), bad, url=f"{s.base}/mcp", token=s.agent)
            )


# --- LangGraph, through langchain-mcp-adapters ----------------------------------------


def _examples_python() -> Path:
    python = Path(os.environ.get("CAVEAT_EXAMPLES_PYTHON", ROOT / ".venv-examples/bin/python"))
    assert python.exists(), (
        f"no {python}: `make examples-venv` builds it (examples/requirements.txt)"
    )
    return python


def test_the_langgraph_recipe_cites_proposes_and_drops_a_revoked_item(
    db_url: str, tmp_path: Path
) -> None:
    case = "INC-LG"
    with serving(db_url) as s:
        item_id = precedent(s.rt)
        script = {
            "case": case,
            "query": QUERY,
            "subjects": ["payment-api"],
            "observations": [POOL],
            "cite": {
                "item": item_id,
                "case": case,
                "influence": "decisive",
                "rationale": "the same pool max, the same exhaustion",
            },
            "propose": {"case": case, "proposals": [LESSON, UNSUPPORTED]},
            "answer": "Restarted payment-api; proposed the lesson.",
        }
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
        env |= {
            "CAVEAT_URL": s.base,
            "CAVEAT_TOKEN": s.agent,
            "CAVEAT_SME_TOKEN": s.sme,
            "PYTHONPATH": str(EXAMPLES),
        }
        done = subprocess.run(
            [str(_examples_python()), str(ROOT / "tests/caveat/_langgraph_driver.py")],
            input=json.dumps(script),
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:] or done.stdout
        _check_the_store(s, case, item_id)
    run = json.loads(done.stdout)
    assert (run["recalled"], run["used"]) == ([item_id], [item_id])
    assert run["tools_bound"] == ["cite", "explain", "observe", "propose"]
    first, second, third = run["seen"]
    assert PRECEDENT_TEXT in first and f"[{item_id}]" in first
    assert PRECEDENT_TEXT not in second and PRECEDENT_TEXT not in third
    assert "evidence_missing" in third  # the gate's refusal reached the model
    assert [c["usable"] for c in run["checks"]] == [[item_id], [], []]
    assert run["checks"][1]["dropped"] == {str(item_id): "revoked"}
    assert run["revoked"] == item_id and run["context"] == {}
    assert run["answer"] == "Restarted payment-api; proposed the lesson."
    assert run["closed"]["status"] == "closed"


# --- the page and the command lines ----------------------------------------------------

_EXCERPT = re.compile(r"^```python\n# (examples/\w+\.py) \(excerpt\)\n(.*?)^```$", re.S | re.M)


def test_the_pages_excerpts_are_the_examples_code() -> None:
    """docs/agents.md quotes the examples: each excerpt is in its file, verbatim."""
    found = _EXCERPT.findall((ROOT / "docs" / "agents.md").read_text())
    assert sorted({path for path, _ in found}) == [
        "examples/langgraph_incident_agent.py",
        "examples/openai_agents_incident_agent.py",
    ]
    for path, code in found:
        assert code in (ROOT / path).read_text(), f"docs/agents.md quotes {path} wrongly"


@pytest.mark.parametrize("name", ["openai_agents_incident_agent", "langgraph_incident_agent"])
def test_the_command_line_wants_a_token(name: str) -> None:
    python = sys.executable if name.startswith("openai") else str(_examples_python())
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
    done = subprocess.run(
        [python, str(EXAMPLES / f"{name}.py"), "--case", "INC-1", "--query", "pool"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and "--token (or CAVEAT_TOKEN)" in done.stderr
