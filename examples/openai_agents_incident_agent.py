"""An incident agent on the OpenAI Agents SDK, with caveat over MCP (streamable HTTP).

The loop (docs/agents.md, "The loop"): open the case, observe, recall, record the use
of what goes into the context, then let the agent work. Before EACH model call the
run's ``call_model_input_filter`` asks caveat's ``check_context`` about the context,
drops what it drops (an item revoked, refuted or re-opened since recall, or whose
conditions no longer hold) and rebuilds the instructions from what is left; the model
cites what influenced it and proposes the lesson through caveat's tools; the case is
closed at the end.

The model is injectable: a model name the SDK resolves (``gpt-4.1``, with
``OPENAI_API_KEY`` set), or any ``agents.Model`` (the test suite passes a scripted one,
tests/caveat/test_recipes.py). Run it against ``caveat serve``:

    python examples/openai_agents_incident_agent.py --url http://127.0.0.1:8080 \
        --token "$CAVEAT_TOKEN" --model gpt-4.1 --case INC-7 \
        --query "checkout slow, payment api connection pool exhausted" \
        --subject payment-api \
        --observe payment-api config.connection_pool.max 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, Model, RunConfig, RunHooks, Runner
from agents.mcp import MCPServerStreamableHttp, create_static_tool_filter
from agents.run_config import CallModelData, ModelInputData

INSTRUCTIONS = (
    "You respond to an incident. Below are the precedents caveat says apply now. "
    "Cite (tool `cite`, with the case) each precedent that influenced you, with its "
    "influence (decisive, contributing, considered, ignored) and why; propose (tool "
    "`propose`) what this incident taught, as a claim with its conditions and evidence; "
    "then answer with your summary."
)
#: caveat's tools the model may call; the loop itself calls the others.
MODEL_TOOLS = ["observe", "explain", "cite", "propose"]


class CaveatRefusal(Exception):
    """A tool call caveat refused: the text starts with the stable code."""


@dataclass
class Incident:
    """What the agent is asked to handle."""

    case: str
    query: str
    subjects: list[str]
    observations: list[dict[str, Any]] = field(default_factory=list)
    close_as: str | None = "confirmed"  # None leaves the case open


@dataclass
class Run:
    """What the loop did: the context as it ended, each context check, the answer."""

    recalled: list[int] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    context: dict[int, str] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    answer: str = ""
    closed: dict[str, Any] | None = None


async def call(server: MCPServerStreamableHttp, name: str, **args: Any) -> dict[str, Any]:
    """One caveat tool call through the SDK's MCP server; its structured answer."""
    result = await server.call_tool(name, args)
    if result.is_error:
        raise CaveatRefusal(" ".join(getattr(c, "text", "") for c in result.content))
    return dict(result.structured_content or {})


def prompt(context: dict[int, str]) -> str:
    """The instructions with the context that is usable now."""
    lines = [f"[{item}] {text}" for item, text in context.items()] or ["(none)"]
    return INSTRUCTIONS + "\n\nPrecedents (cite them by id):\n" + "\n".join(lines)


async def run_incident(
    model: str | Model,
    incident: Incident,
    *,
    url: str,
    token: str,
    hooks: RunHooks[Any] | None = None,
    tracing: bool = False,
) -> Run:
    """Handle ``incident`` with ``model`` against caveat's MCP server at ``url``."""
    run = Run()
    server = MCPServerStreamableHttp(
        {"url": url, "headers": {"Authorization": f"Bearer {token}"}, "timeout": 30},
        name="caveat",
        client_session_timeout_seconds=60,
        tool_filter=create_static_tool_filter(allowed_tool_names=MODEL_TOOLS),
    )
    async with server:
        case = incident.case
        # 1. open the case, 2. observe what is true now
        await call(server, "open_case", case=case, subjects=incident.subjects)
        if incident.observations:
            await call(server, "observe", observations=incident.observations)
        # 3. recall: only precedents whose conditions hold now
        ask = {"query": incident.query, "subjects": incident.subjects, "case": case}
        found = await call(server, "recall", **ask)
        run.context = {r["item"]["id"]: r["item"]["text"] for r in found["items"]}
        run.recalled = list(run.context)
        # 4. record the use of what goes into the context
        used = await call(server, "record_use", **ask, used=run.recalled)
        run.used = used["used"]
        run.context = {i: t for i, t in run.context.items() if i in run.used}

        async def guard(data: CallModelData[Any]) -> ModelInputData:
            """6. Before each model call: drop what caveat withdrew since recall."""
            checked = await call(server, "check_context", items=list(run.context), case=case)
            run.checks.append(checked)
            for item in checked["dropped"]:
                run.context.pop(int(item), None)
            return ModelInputData(input=data.model_data.input, instructions=prompt(run.context))

        agent = Agent(name="incident", instructions=INSTRUCTIONS, model=model, mcp_servers=[server])
        config = RunConfig(call_model_input_filter=guard, tracing_disabled=not tracing)
        # 5. cite and 7. propose: the model does, through caveat's tools
        result = await Runner.run(
            agent, f"Incident {case}: {incident.query}", run_config=config, hooks=hooks
        )
        run.answer = str(result.final_output)
        # 8. close the case: what was cited gets support or counter signals
        if incident.close_as:
            run.closed = await call(server, "close_case", case=case, outcome=incident.close_as)
    return run


def main(argv: list[str] | None = None) -> int:
    """The command line: a real model by name, caveat's URL and an agent's token."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--url", default=os.environ.get("CAVEAT_URL", "http://127.0.0.1:8080"))
    p.add_argument("--token", default=os.environ.get("CAVEAT_TOKEN"))
    p.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4.1"))
    p.add_argument("--case", required=True)
    p.add_argument("--query", required=True)
    p.add_argument("--subject", action="append", default=[], dest="subjects")
    p.add_argument(
        "--observe",
        nargs=3,
        action="append",
        default=[],
        metavar=("SUBJECT", "ATTRIBUTE", "JSON_VALUE"),
    )
    p.add_argument("--leave-open", action="store_true", help="do not close the case")
    a = p.parse_args(argv)
    if not a.token:
        p.error("--token (or CAVEAT_TOKEN): an agent's token, `caveat token create --role agent`")
    seen = [{"subject": s, "attribute": k, "value": json.loads(v)} for s, k, v in a.observe]
    incident = Incident(a.case, a.query, a.subjects, seen, None if a.leave_open else "confirmed")
    try:
        run = asyncio.run(
            run_incident(a.model, incident, url=f"{a.url.rstrip('/')}/mcp", token=a.token)
        )
    except CaveatRefusal as exc:
        print(f"caveat refused: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"used": run.used, "checks": run.checks, "answer": run.answer}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
