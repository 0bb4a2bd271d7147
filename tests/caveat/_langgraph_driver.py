"""Runs examples/langgraph_incident_agent.py with LangChain's own fake chat model,
scripted, in ``.venv-examples`` (test_recipes.py starts it; it imports nothing of
caveat's).

stdin: the script (case, query, subjects, observations, the ``cite`` and ``propose``
arguments, the final answer). Environment: ``CAVEAT_URL``, ``CAVEAT_TOKEN`` (the
agent's) and ``CAVEAT_SME_TOKEN``: right after the agent's ``cite`` tool call ends, an
SME revokes the cited item over HTTP, so the graph's guard runs between two model calls
with the item revoked. stdout: what the run did and what the model saw, as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any
from uuid import UUID

import httpx
import langgraph_incident_agent as example
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage


class ScriptedChatModel(FakeMessagesListChatModel):
    """LangChain's fake chat model, answering the scripted messages in turn; it binds
    tools (it keeps their names) and keeps every input it was called with."""

    seen: list[str] = []
    bound: list[str] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        self.bound = sorted(t.name for t in tools)
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen = [*self.seen, "\n".join(str(m.content) for m in messages)]
        return super()._generate(messages, *args, **kwargs)


class SmeRevokes(AsyncCallbackHandler):
    """An SME revokes the cited item over HTTP right after the agent's ``cite``."""

    def __init__(self, url: str, token: str, item: int) -> None:
        self.url, self.token, self.item = url, token, item
        self.names: dict[UUID, str] = {}
        self.revoked: int | None = None

    async def on_tool_start(
        self, serialized: dict[str, Any], input_str: str, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self.names[run_id] = serialized.get("name") or kwargs.get("name") or ""

    async def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if self.names.get(run_id) != "cite":
            return
        headers = {"Authorization": f"Bearer {self.token}"}
        async with httpx.AsyncClient(base_url=self.url, headers=headers, timeout=30) as c:
            res = await c.post(f"/v1/items/{self.item}/revoke", json={"reason": "wrong pool"})
            res.raise_for_status()
        self.revoked = self.item


def main() -> None:
    script = json.load(sys.stdin)
    url = os.environ["CAVEAT_URL"]
    model = ScriptedChatModel(
        responses=[
            AIMessage("", tool_calls=[{"name": "cite", "args": script["cite"], "id": "c1"}]),
            AIMessage("", tool_calls=[{"name": "propose", "args": script["propose"], "id": "c2"}]),
            AIMessage(script["answer"]),
        ]
    )
    sme = SmeRevokes(url, os.environ["CAVEAT_SME_TOKEN"], script["cite"]["item"])
    incident = example.Incident(
        script["case"], script["query"], script["subjects"], script["observations"]
    )
    run = asyncio.run(
        example.run_incident(
            model,
            incident,
            url=f"{url}/mcp",
            token=os.environ["CAVEAT_TOKEN"],
            config={"callbacks": [sme]},
        )
    )
    json.dump(
        {
            "recalled": run.recalled,
            "used": run.used,
            "context": run.context,
            "checks": run.checks,
            "answer": run.answer,
            "closed": run.closed,
            "seen": model.seen,
            "tools_bound": model.bound,
            "revoked": sme.revoked,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
