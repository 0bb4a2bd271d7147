"""The MCP server (the official ``mcp`` SDK, 2.x): the tools of an agent's loop.

``build_server(runtime, token)`` gives an ``MCPServer`` acting for the bearer of an
API token (``caveat mcp`` serves it on stdio for ``CAVEAT_TOKEN``);
``build_server(runtime)`` acts, call by call, for the bearer token of the HTTP request
that carries the call (``caveat serve`` mounts it as the streamable-HTTP transport at
``/mcp``: ``caveat.api``). Every tool call authenticates the token again, so a revoked
token stops at the next call; each tool validates its typed input, calls one
``caveat.app`` function and returns its output model as structured content. A refusal
is a tool error whose text starts with the stable code (``forbidden: ...``,
``not_found: ...``). See docs/agents.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import ValidationError

import claims
import factgen
import recall
from caveat import app as use
from caveat.app._input import first_error, instant, proposal_anchor
from caveat.app.views import (
    case_view,
    citation_view,
    context_view,
    diff_view,
    fact_json,
    recall_view,
)
from predicates.errors import CaveatError, InputError, Unauthenticated

__all__ = ["TOOLS", "bearer", "build_server"]

#: The tools, by name (a test checks each is served and documented).
TOOLS = (
    "recall",
    "explain",
    "record_use",
    "check_context",
    "propose",
    "observe",
    "cite",
    "open_case",
    "close_case",
    "diff",
)

_T = TypeVar("_T")
_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def bearer(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (``unauthenticated``
    without one)."""
    scheme, _, given = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise Unauthenticated("a bearer API token is required")
    return given.strip()


def build_server(runtime: use.Runtime, token: str | None = None) -> MCPServer:
    """The caveat MCP server acting for ``token``'s principal, in its tenant; without
    ``token``, each call acts for the bearer token of the HTTP request carrying it."""
    server = MCPServer("caveat")

    def act(ctx: Context, call: Callable[[use.Runtime, claims.Actor], _T]) -> _T:
        try:
            given = token if token is not None else bearer((ctx.headers or {}).get("authorization"))
            rt, actor = use.authenticate(runtime, given)
            return call(rt, actor)
        except CaveatError as exc:
            raise ToolError(f"{exc.code}: {exc.message}") from exc
        except ValidationError as exc:
            raise ToolError(f"invalid_input: {first_error(exc.errors())}") from exc

    def given(observations: list[dict[str, Any]] | None) -> list[factgen.Observation]:
        return [
            factgen.Observation(o["subject"], o["attribute"], o["value"], o.get("source"))
            for o in observations or []
        ]

    def request(
        query: str,
        subjects: list[str] | None,
        case: str | None,
        observations: list[dict[str, Any]] | None,
        limit: int,
        explain: bool = False,
        budget: int | None = None,
    ) -> recall.RecallRequest:
        return recall.RecallRequest(
            query=query,
            subjects=subjects or None,
            case_id=case,
            observations=given(observations),
            limit=limit,
            explain=explain,
            budget=budget,
        )

    @server.tool(name="recall", annotations=_READ)
    def recall_tool(
        ctx: Context,
        query: str,
        subjects: list[str] | None = None,
        case: str | None = None,
        observations: list[dict[str, Any]] | None = None,
        limit: int = 10,
        budget: int | None = None,
    ) -> dict[str, Any]:
        """Have we seen this before? Precedents whose conditions hold now, ranked, each
        with its provenance and the condition values that let it through. A read:
        call record_use with the ids you use. With a token budget, `packed.text` is
        the answer to paste into the prompt."""
        req = request(query, subjects, case, observations, limit, budget=budget)
        return act(ctx, lambda rt, a: recall_view(use.recall_items(rt, a, req)))

    @server.tool(annotations=_READ)
    def explain(
        ctx: Context,
        query: str,
        subjects: list[str] | None = None,
        case: str | None = None,
        observations: list[dict[str, Any]] | None = None,
        limit: int = 10,
    ) -> dict[str, Any]:
        """Recall with the reasons: which precedents were withheld by which gate, each
        condition's value, and the observations that would decide UNKNOWN ones."""
        req = request(query, subjects, case, observations, limit, explain=True)
        return act(ctx, lambda rt, a: recall_view(use.recall_items(rt, a, req)))

    @server.tool()
    def record_use(
        ctx: Context,
        query: str,
        used: list[int],
        subjects: list[str] | None = None,
        case: str | None = None,
        observations: list[dict[str, Any]] | None = None,
        limit: int = 10,
    ) -> dict[str, Any]:
        """Record the use of items a recall returned (same query, subjects, case): the
        server re-checks each; only items the same recall would return are used."""
        req = request(query, subjects, case, observations, limit)

        def run(rt: use.Runtime, a: claims.Actor) -> dict[str, Any]:
            done = use.record_use(rt, a, req, used)
            return {
                "used": list(done.used),
                "refused": {str(k): v for k, v in done.refused.items()},
            }

        return act(ctx, run)

    @server.tool()
    def check_context(
        ctx: Context,
        items: list[int],
        case: str | None = None,
        observations: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Before each model call: which items in your context may still be used, by
        recall's rule (a revoked, refuted or re-opened item, or one whose conditions no
        longer hold on what is observed now, inline observations first, is dropped)."""
        return act(
            ctx,
            lambda rt, a: context_view(
                use.check_context(
                    rt, a, items, case_id=case, record=True, observations=given(observations)
                )
            ),
        )

    @server.tool()
    def propose(
        ctx: Context,
        proposals: list[dict[str, Any]],
        case: str | None = None,
        scope: str | None = None,
        source: str | None = None,
    ) -> dict[str, Any]:
        """Propose claims for the open case (or for `scope`, "axis:id", instead; the
        proposal schema: `caveat schema proposals`); each is written through the gate
        or refused with its code."""

        def run(rt: use.Runtime, a: claims.Actor) -> dict[str, Any]:
            parsed = claims.parse_model_output(json.dumps({"proposals": proposals}))
            anchor = proposal_anchor(case, scope)
            result = use.propose(rt, a, parsed, scope=anchor, source=source or "mcp")
            return {"outcomes": [o.to_dict() for o in result.outcomes]}

        return act(ctx, run)

    @server.tool()
    def observe(ctx: Context, observations: list[dict[str, Any]]) -> dict[str, Any]:
        """Record typed facts: [{subject, attribute, value, source?}]; one value of the
        wrong type stores nothing."""

        def run(rt: use.Runtime, a: claims.Actor) -> dict[str, Any]:
            try:
                obs = [
                    factgen.Observation(o["subject"], o["attribute"], o["value"], o.get("source"))
                    for o in observations
                ]
            except (KeyError, TypeError) as exc:
                raise InputError(
                    f"observations: each needs subject, attribute, value ({exc})"
                ) from exc
            facts = use.observe(rt, a, obs)
            return {"facts": [fact_json(f) for f in facts]}

        return act(ctx, run)

    @server.tool()
    def cite(
        ctx: Context,
        item: int,
        case: str,
        influence: Literal["decisive", "contributing", "considered", "ignored"],
    ) -> dict[str, Any]:
        """Record that an item in the case's context influenced it."""
        return act(
            ctx, lambda rt, a: citation_view(use.cite(rt, a, case, item, influence=influence))
        )

    @server.tool()
    def open_case(ctx: Context, case: str, subjects: list[str] | None = None) -> dict[str, Any]:
        """Open a case for this incident or run; recall and write inside it."""
        return act(
            ctx, lambda rt, a: case_view(use.open_case(rt, a, case, subjects=subjects or []))
        )

    @server.tool()
    def close_case(
        ctx: Context, case: str, outcome: Literal["confirmed", "rejected"]
    ) -> dict[str, Any]:
        """Close the case; the items cited get support or counter signals."""

        def run(rt: use.Runtime, a: claims.Actor) -> dict[str, Any]:
            res = use.close_case(rt, a, case, outcome=outcome)
            return {**case_view(res.case), "signals": {str(i): v for i, v in res.signals.items()}}

        return act(ctx, run)

    @server.tool(annotations=_READ)
    def diff(
        ctx: Context, from_: str, to: str, subjects: list[str] | None = None
    ) -> dict[str, Any]:
        """What became and stopped being recallable between two ISO 8601 instants."""

        def run(rt: use.Runtime, a: claims.Actor) -> dict[str, Any]:
            start, end = instant(from_, "from_"), instant(to, "to")
            assert start is not None and end is not None
            return diff_view(use.diff(rt, a, from_=start, to=end, subjects=subjects or None))

        return act(ctx, run)

    return server
