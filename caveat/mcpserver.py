"""The MCP server (the official ``mcp`` SDK, 2.x): the tools of an agent's loop.

``build_server(runtime, token)`` gives an ``MCPServer`` acting for the bearer of an
API token (``caveat mcp`` serves it on stdio for ``CAVEAT_TOKEN``);
``build_server(runtime)`` acts, call by call, for the bearer token of the HTTP request
that carries the call (``caveat serve`` mounts it as the streamable-HTTP transport at
``/mcp``: ``caveat.api``). Every tool call authenticates the token again, so a revoked
token stops at the next call.

Each tool's input schema is a request model of ``caveat.app`` (``recall``, ``explain``
and ``record_use`` take every field of ``RecallIn``; ``check_context`` takes
``ContextIn``), validated by that model on the arguments as sent (no coercion, as
HTTP validates a body); its output schema is the answer's model
(``caveat.answers``), and its structured content the view's JSON as HTTP sends
it (``_answer``). A refusal is a tool error whose text starts with the stable code
(``not_found: no case 'INC-404'``; arguments the schema refuses, or that it does not
name, are ``invalid_input: <field>: <what>``), logged without a traceback. See
docs/agents.md.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

import claims
from caveat import app as use
from caveat.answers._answers import (
    CaseOut,
    CitationOut,
    ClosedOut,
    ContextOut,
    DiffOut,
    FactsOut,
    OutcomesOut,
    RecallOut,
    TurnOut,
    UseOut,
)
from caveat.app._blocks import BlockSetOut, BlocksOut, block_view, set_view
from caveat.app._input import first_error, instant, proposal_anchor
from caveat.app._requests import (
    CiteToolIn,
    ContextIn,
    ObservationIn,
    ProposalIn,
    RecallIn,
    RecordUseIn,
    TurnIn,
)
from caveat.app.views import (
    case_view,
    citation_view,
    closed_view,
    context_view,
    diff_view,
    fact_json,
    recall_view,
    use_view,
)
from caveat.connectors._refresh_recall import recall as refreshed_recall
from predicates.errors import CaveatError, InputError, Unauthenticated

__all__ = ["TOOLS", "bearer", "build_server"]

#: The tools, by name (a test checks each is served and documented).
TOOLS = (
    "recall",
    "explain",
    "record_use",
    "check_context",
    "propose",
    "submit_turn",
    "observe",
    "cite",
    "open_case",
    "close_case",
    "diff",
    "block_get",
    "block_set",
)

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])
#: The attribute naming the request model of a tool built by ``_taking``.
_REQUEST = "__caveat_request__"
_READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_log = logging.getLogger(__name__)


class Refusal(ToolError):
    """A refusal with its stable code: the tool error's text is ``code: message``."""


def bearer(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header (``unauthenticated``
    without one)."""
    scheme, _, given = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise Unauthenticated("a bearer API token is required")
    return given.strip()


class CaveatServer(MCPServer):
    """``MCPServer`` whose tool errors start with the stable code (the SDK's own prefix,
    ``Error executing tool <name>: ``, is not sent), that refuses arguments a tool does
    not take, and that logs a refusal on one line."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            return _refused(name, f"not_found: no tool {name!r} (tools: {', '.join(TOOLS)})")
        unknown = sorted(set(arguments) - set(tool.parameters.get("properties", {})))
        if unknown:
            known = ", ".join(tool.parameters.get("properties", {}))
            return _refused(name, f"invalid_input: {unknown[0]}: not an argument ({known})")
        request = getattr(tool.fn, _REQUEST, None)
        if request is not None:
            # the request model sees the arguments as sent (the SDK's own argument model
            # coerces "1" to 1): a value HTTP refuses is refused here the same way
            try:
                request.model_validate(tool.fn_metadata.pre_parse_json(arguments))
            except ValidationError as exc:
                return _refused(name, f"invalid_input: {first_error(exc.errors())}")
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a crash: the SDK logs it with its traceback
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                return _refused(name, f"invalid_input: {first_error(cause.errors())}")
            return _refused(name, str(cause if isinstance(cause, Refusal) else exc))


def _refused(tool: str, text: str) -> CallToolResult:
    _log.info("Tool %r refused: %r", tool, text)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def _taking(model: type[BaseModel], *, without: tuple[str, ...] = ()) -> Callable[[_F], _F]:
    """Give a tool ``def f(ctx, **fields)`` the fields of ``model`` as its parameters
    (the SDK builds the input schema from the signature): each field's type, default,
    constraints and description, so the schema is the model's."""

    def give(fn: _F) -> _F:
        sig = inspect.signature(fn, eval_str=True)
        ctx = sig.parameters["ctx"]
        fields = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=_arg(f))
            for name, f in model.model_fields.items()
            if name not in without
        ]
        fn.__signature__ = sig.replace(parameters=[ctx, *fields])  # type: ignore[attr-defined]
        setattr(fn, _REQUEST, model)
        return fn

    return give


def _answer(view: dict[str, Any]) -> CallToolResult:
    """A view as the tool's answer: its structured content is the view's JSON form as it
    is, as HTTP sends it (the SDK checks it against the tool's output schema, the model
    its return annotation names: ``Annotated[CallToolResult, RecallOut]``)."""
    text = json.dumps(view, indent=2, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=view)


def _tenant(token: str, runtime: use.Runtime) -> str:
    """The tenant a token names (the runtime's when it names none)."""
    try:
        return claims.token_tenant(token)
    except CaveatError:
        return runtime.tenant


def _arg(field: Any) -> Any:
    return Annotated[field.annotation, field]


def build_server(runtime: use.Runtime, token: str | None = None) -> MCPServer:
    """The caveat MCP server acting for ``token``'s principal, in its tenant; without
    ``token``, each call acts for the bearer token of the HTTP request carrying it."""
    server = CaveatServer("caveat")

    def act(ctx: Context, call: Callable[[use.Runtime, claims.Actor], _T]) -> _T:
        try:
            given = token if token is not None else bearer((ctx.headers or {}).get("authorization"))
            try:
                rt, actor = use.authenticate(runtime, given)
            except Unauthenticated as exc:
                if token is None:
                    raise
                # stdio: say which store and tenant were asked (a host that drops the
                # environment starts the server on another store)
                raise Unauthenticated(
                    f"{exc.message} (looked in tenant {_tenant(given, runtime)!r} of "
                    f"{runtime.store()})"
                ) from exc
            return call(rt, actor)
        except CaveatError as exc:
            raise Refusal(f"{exc.code}: {exc.message}") from exc
        except ValidationError as exc:
            raise Refusal(f"invalid_input: {first_error(exc.errors())}") from exc

    def recall_answer(ctx: Context, fields: dict[str, Any]) -> CallToolResult:
        def run(rt: use.Runtime, a: claims.Actor) -> CallToolResult:
            done = refreshed_recall(rt, a, RecallIn.model_validate(fields))
            return _answer(recall_view(done.result, done.source_errors))

        return act(ctx, run)

    @server.tool(name="recall", annotations=_READ)
    @_taking(RecallIn)
    def recall_tool(ctx: Context, **fields: Any) -> Annotated[CallToolResult, RecallOut]:
        """Have we seen this before? Precedents whose conditions hold now, ranked, each
        with its provenance and the condition values that let it through. A read:
        call record_use with the ids you use (and the same arguments). With a token
        budget, `packed.text` is the answer to paste into the prompt. With refresh,
        what the precedents' conditions lack is first pulled from the team's fact
        sources (Prometheus, ...) within refresh_deadline_ms; a source that failed is
        named in source_errors."""
        return recall_answer(ctx, fields)

    @server.tool(annotations=_READ)
    @_taking(RecallIn, without=("explain",))
    def explain(ctx: Context, **fields: Any) -> Annotated[CallToolResult, RecallOut]:
        """Recall with the reasons: which precedents were withheld by which gate, each
        condition's value, and the observations that would decide UNKNOWN ones."""
        return recall_answer(ctx, {**fields, "explain": True})

    @server.tool()
    @_taking(RecordUseIn)
    def record_use(ctx: Context, **fields: Any) -> Annotated[CallToolResult, UseOut]:
        """Record the use of items a recall returned (the recall's arguments, and the
        ids used): the server re-checks each; only items the same recall would return
        are used."""

        def run(rt: use.Runtime, a: claims.Actor) -> CallToolResult:
            body = RecordUseIn.model_validate(fields)
            return _answer(use_view(use.record_use(rt, a, body.to_request(), body.used)))

        return act(ctx, run)

    @server.tool()
    @_taking(ContextIn)
    def check_context(ctx: Context, **fields: Any) -> Annotated[CallToolResult, ContextOut]:
        """Before each model call: which items in your context may still be used, by
        recall's rule (a revoked, refuted or re-opened item, or one whose conditions no
        longer hold on what is observed now, inline observations first, is dropped)."""

        def run(rt: use.Runtime, a: claims.Actor) -> CallToolResult:
            body = ContextIn.model_validate(fields)
            answer = use.check_context(
                rt,
                a,
                body.items,
                case_id=body.case,
                record=True,
                observations=body.to_observations(),
                session=body.session,
            )
            return _answer(context_view(answer))

        return act(ctx, run)

    @server.tool()
    def propose(
        ctx: Context,
        proposals: Annotated[list[ProposalIn], Field(min_length=1)],
        case: Annotated[
            str | None, Field(default=None, min_length=1, description="The open case.")
        ] = None,
        scope: Annotated[
            str | None,
            Field(default=None, description='"axis:id" (e.g. "agent:agent-ir") instead of a case'),
        ] = None,
        source: str | None = None,
    ) -> Annotated[CallToolResult, OutcomesOut]:
        """Propose claims for the open case, or for `scope` ("axis:id") instead (each a
        `claims.Proposal`: `caveat schema proposals`); each is written through the gate
        or refused with its code."""

        def run(rt: use.Runtime, a: claims.Actor) -> CallToolResult:
            anchor = proposal_anchor(case, scope)
            result = use.propose(rt, a, proposals, scope=anchor, source=source or "mcp")
            return _answer({"outcomes": [o.to_dict() for o in result.outcomes]})

        return act(ctx, run)

    @server.tool()
    @_taking(TurnIn)
    def submit_turn(ctx: Context, **fields: Any) -> Annotated[CallToolResult, TurnOut]:
        """Hand this turn to the server's extractor instead of extracting claims yourself:
        answered at once with the turn's id and state (`queued`); the server's model
        proposes claims from it later, written through the gate as you (see
        `GET /v1/turns/{id}` for the outcomes). The same `id` again is the same turn.
        `extractor_not_configured` when the server has no extractor: then `propose`."""

        def run(rt: use.Runtime, a: claims.Actor) -> CallToolResult:
            body = TurnIn.model_validate(fields)
            anchor = proposal_anchor(body.case, body.scope)
            return _answer(use.submit_turn(rt, a, body.agent_turn(), scope=anchor).record.to_json())

        return act(ctx, run)

    @server.tool()
    def observe(
        ctx: Context, observations: Annotated[list[ObservationIn], Field(min_length=1)]
    ) -> Annotated[CallToolResult, FactsOut]:
        """Record typed facts: [{subject, attribute, value, source?}]; one value of the
        wrong type stores nothing."""

        def run(rt: use.Runtime, a: claims.Actor) -> CallToolResult:
            facts = use.observe(rt, a, [o.observation() for o in observations])
            return _answer({"facts": [fact_json(f) for f in facts]})

        return act(ctx, run)

    @server.tool()
    @_taking(CiteToolIn)
    def cite(ctx: Context, **fields: Any) -> Annotated[CallToolResult, CitationOut]:
        """Record that an item in the case's context influenced it: its influence, and
        for a skill or rule what it expected and what you observed or did (both or
        neither; equal values are compliance `complied`, otherwise `violation` or
        `discretion` by the skill's enforcement level), and your rationale."""

        def run(rt: use.Runtime, a: claims.Actor) -> CallToolResult:
            body = CiteToolIn.model_validate(fields)
            cited = use.cite(
                rt,
                a,
                body.case,
                body.item,
                influence=body.influence,
                expected=body.expected,
                observed=body.observed,
                rationale=body.rationale,
            )
            return _answer(citation_view(cited))

        return act(ctx, run)

    @server.tool()
    def open_case(
        ctx: Context, case: Annotated[str, Field(min_length=1)], subjects: list[str] | None = None
    ) -> Annotated[CallToolResult, CaseOut]:
        """Open a case for this incident or run; recall and write inside it."""
        return act(
            ctx,
            lambda rt, a: _answer(case_view(use.open_case(rt, a, case, subjects=subjects or []))),
        )

    @server.tool()
    def close_case(
        ctx: Context,
        case: Annotated[str, Field(min_length=1)],
        outcome: Literal["confirmed", "rejected"],
    ) -> Annotated[CallToolResult, ClosedOut]:
        """Close the case; the items cited get support or counter signals."""
        return act(
            ctx,
            lambda rt, a: _answer(closed_view(use.close_case(rt, a, case, outcome=outcome))),
        )

    @server.tool(annotations=_READ)
    def diff(
        ctx: Context,
        from_: str,
        to: str,
        subjects: list[str] | None = None,
        purpose: str | None = None,
    ) -> Annotated[CallToolResult, DiffOut]:
        """What became and stopped being recallable between two ISO 8601 instants."""

        def run(rt: use.Runtime, a: claims.Actor) -> CallToolResult:
            start, end = instant(from_, "from_"), instant(to, "to")
            if start is None or end is None:
                raise InputError("from_ and to are instants", attribute="from_")
            res = use.diff(rt, a, from_=start, to=end, subjects=subjects or None, purpose=purpose)
            return _answer(diff_view(res))

        return act(ctx, run)

    @server.tool(annotations=_READ)
    def block_get(
        ctx: Context, label: Annotated[str | None, Field(min_length=1)] = None
    ) -> Annotated[CallToolResult, BlocksOut]:
        """Your own core blocks (agent:<you>; docs/blocks.md), or the one called label.
        Every recall packs them first, with the tenant's, and returns them in `blocks`."""

        def run(rt: use.Runtime, a: claims.Actor) -> CallToolResult:
            own = f"agent:{a.id}"
            rows = (
                use.block_list(rt, a, scope=own)
                if label is None
                else use.block_show(rt, a, label, scope=own)
            )
            return _answer({"blocks": [block_view(b) for b in rows]})

        return act(ctx, run)

    @server.tool()
    def block_set(
        ctx: Context,
        label: Annotated[str, Field(min_length=1)],
        text: Annotated[str, Field(min_length=1)],
    ) -> Annotated[CallToolResult, BlockSetOut]:
        """Set your own core block label (agent:<you>) to text: the text before is kept
        as its history; the same text is a duplicate. Packed first in your recalls."""

        def run(rt: use.Runtime, a: claims.Actor) -> CallToolResult:
            own = f"agent:{a.id}"
            return _answer(set_view(use.block_set(rt, a, label, text, scope=own), label, own))

        return act(ctx, run)

    return server
