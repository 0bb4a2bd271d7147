"""An incident agent on LangGraph, with caveat's tools loaded by langchain-mcp-adapters
over MCP (streamable HTTP).

The loop (docs/agents.md, "The loop"): open the case, observe, recall, record the use
of what goes into the context; then a graph whose ``guard`` node runs before EACH model
call: it asks caveat's ``check_context`` about the context, drops what it drops (an
item revoked, refuted or re-opened since recall, or whose conditions no longer hold)
and the ``model`` node builds its system prompt from what is left. The model cites what
influenced it and proposes the lesson through caveat's tools (a ``ToolNode``); the
case is closed at the end.

The model is injectable: any LangChain chat model that binds tools
(``ChatOpenAI(model="gpt-4.1")``, ``ChatAnthropic(...)``, or ``init_chat_model``'s
``provider:name`` from the ``langchain`` package, which ``--model`` uses); the test
suite passes a scripted fake (tests/caveat/test_recipes.py). Its requirements are in
examples/requirements.txt (langchain-mcp-adapters needs the MCP SDK 1.x: run it in a
virtual environment of its own, as ``make examples-venv`` builds). Run it against
``caveat serve``:

    python examples/langgraph_incident_agent.py --url http://127.0.0.1:8080 \
        --token "$CAVEAT_TOKEN" --model openai:gpt-4.1 --case INC-7 \
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

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

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


async def call(tools: dict[str, BaseTool], name: str, **args: Any) -> dict[str, Any]:
    """One caveat tool call through the adapter's tool; its structured answer."""
    call_id = f"loop-{name}"
    message = await tools[name].ainvoke(
        {"type": "tool_call", "name": name, "args": args, "id": call_id}
    )
    assert isinstance(message, ToolMessage)
    if message.status == "error":
        raise CaveatRefusal(str(message.text))
    artifact = message.artifact or {}
    return dict(artifact.get("structured_content") or {})


def prompt(context: dict[int, str]) -> str:
    """The system prompt with the context that is usable now."""
    lines = [f"[{item}] {text}" for item, text in context.items()] or ["(none)"]
    return INSTRUCTIONS + "\n\nPrecedents (cite them by id):\n" + "\n".join(lines)


def graph(model: BaseChatModel, tools: dict[str, BaseTool], case: str, run: Run) -> Any:
    """guard -> model -> tools -> guard -> model ... until the model answers."""
    offered = [tools[name] for name in MODEL_TOOLS]
    bound = model.bind_tools(offered)

    async def guard(state: MessagesState) -> dict[str, Any]:
        """6. Before each model call: drop what caveat withdrew since recall."""
        checked = await call(tools, "check_context", items=list(run.context), case=case)
        run.checks.append(checked)
        for item in checked["dropped"]:
            run.context.pop(int(item), None)
        return {}

    async def think(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        messages: list[AnyMessage] = [SystemMessage(prompt(run.context)), *state["messages"]]
        return {"messages": [await bound.ainvoke(messages, config)]}

    g = StateGraph(MessagesState)
    g.add_node("guard", guard)
    g.add_node("model", think)
    g.add_node("tools", ToolNode(offered))
    g.add_edge(START, "guard")
    g.add_edge("guard", "model")
    g.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    g.add_edge("tools", "guard")
    return g.compile()


async def run_incident(
    model: BaseChatModel,
    incident: Incident,
    *,
    url: str,
    token: str,
    config: RunnableConfig | None = None,
) -> Run:
    """Handle ``incident`` with ``model`` against caveat's MCP server at ``url``."""
    run = Run()
    client = MultiServerMCPClient(
        {
            "caveat": {
                "transport": "streamable_http",
                "url": url,
                "headers": {"Authorization": f"Bearer {token}"},
                "timeout": 30,
            }
        }
    )
    async with client.session("caveat") as session:  # one MCP session for the run
        tools = {t.name: t for t in await load_mcp_tools(session)}
        case = incident.case
        # 1. open the case, 2. observe what is true now
        await call(tools, "open_case", case=case, subjects=incident.subjects)
        if incident.observations:
            await call(tools, "observe", observations=incident.observations)
        # 3. recall: only precedents whose conditions hold now
        ask = {"query": incident.query, "subjects": incident.subjects, "case": case}
        found = await call(tools, "recall", **ask)
        run.context = {r["item"]["id"]: r["item"]["text"] for r in found["items"]}
        run.recalled = list(run.context)
        # 4. record the use of what goes into the context
        used = await call(tools, "record_use", **ask, used=run.recalled)
        run.used = used["used"]
        run.context = {i: t for i, t in run.context.items() if i in run.used}
        # 5. cite and 7. propose: the model does, through caveat's tools
        agent = graph(model, tools, case, run)
        ask_model = HumanMessage(f"Incident {case}: {incident.query}")
        final = await agent.ainvoke({"messages": [ask_model]}, config)
        run.answer = str(final["messages"][-1].text)
        # 8. close the case: what was cited gets support or counter signals
        if incident.close_as:
            run.closed = await call(tools, "close_case", case=case, outcome=incident.close_as)
    return run


def main(argv: list[str] | None = None) -> int:
    """The command line: a real model (``provider:name``), caveat's URL, an agent's token."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--url", default=os.environ.get("CAVEAT_URL", "http://127.0.0.1:8080"))
    p.add_argument("--token", default=os.environ.get("CAVEAT_TOKEN"))
    p.add_argument("--model", default=os.environ.get("CAVEAT_AGENT_MODEL", "openai:gpt-4.1"))
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
    try:
        from langchain.chat_models import init_chat_model  # type: ignore[import-not-found]
    except ImportError:
        p.error("--model needs the langchain package and the provider's (langchain-openai)")
    seen = [{"subject": s, "attribute": k, "value": json.loads(v)} for s, k, v in a.observe]
    incident = Incident(a.case, a.query, a.subjects, seen, None if a.leave_open else "confirmed")
    model = init_chat_model(a.model)
    try:
        run = asyncio.run(
            run_incident(model, incident, url=f"{a.url.rstrip('/')}/mcp", token=a.token)
        )
    except CaveatRefusal as exc:
        print(f"caveat refused: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"used": run.used, "checks": run.checks, "answer": run.answer}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
