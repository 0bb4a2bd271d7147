"""Every use case of the application layer reaches every door it should: an HTTP route,
an MCP tool (for the agent's loop), a CLI command, an entry in the docs of each, and a
test that exercises it. Each action goes contract -> route -> tool -> command -> docs
-> tests; this table is where a new use case is added, and the test fails until it has
them all."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from mcp import Client

import recall
from caveat import app as use
from caveat import db
from caveat.api import create_app
from caveat.app._requests import RecallIn
from caveat.cli import app as cli
from caveat.mcpserver import TOOLS, build_server
from caveat.replay import RecallArgs

ROOT = Path(__file__).resolve().parents[2]

#: use case -> (HTTP route or None, MCP tool or None, CLI command)
DOORS: dict[str, tuple[str | None, str | None, str]] = {
    # the world's set-up is the operator's: no route, a file-driven command
    "declare_tenant": (None, None, "schema load"),
    "declare_schema": (None, None, "schema load"),
    "import_entities": (None, None, "entities import"),
    "register_principal": ("/v1/tokens", None, "token create"),  # a token makes its principal
    "audit_verify": ("/v1/audit/verify", None, "audit verify"),
    "audit_entries": ("/v1/audit", None, "audit show"),
    "create_token": ("/v1/tokens", None, "token create"),
    "list_tokens": ("/v1/tokens", None, "token list"),
    "revoke_token": ("/v1/tokens/{token_id}", None, "token revoke"),
    "authenticate": ("/healthz", None, "mcp"),  # every other route and tool authenticates
    "observe": ("/v1/observations", "observe", "observe"),
    "import_facts": ("/v1/events", None, "facts import"),
    "record_event": ("/v1/events", None, "event"),
    "write": ("/v1/items", None, "write"),
    "write_batch": ("/v1/items", None, "write"),
    "propose": ("/v1/proposals", "propose", "proposals apply"),
    # the server-side extractor (docs/proposals.md): the worker step runs in the
    # server's background round, or once by hand
    "submit_turn": ("/v1/turns", "submit_turn", "turns submit"),
    "turn_show": ("/v1/turns/{turn_id}", None, "turns show"),
    "turns_list": ("/v1/turns", None, "turns list"),
    "process_turns": (None, None, "turns run"),
    "add_evidence": ("/v1/evidence", None, "evidence add"),
    "attach_evidence": ("/v1/items/{item_id}/evidence", None, "evidence attach"),
    "item": ("/v1/items/{item_id}", None, "item show"),
    "open_case": ("/v1/cases", "open_case", "case open"),
    "close_case": ("/v1/cases/{case_id}/close", "close_case", "case close"),
    "cite": ("/v1/items/{item_id}/cite", "cite", "cite"),
    "verify": ("/v1/items/{item_id}/verify", None, "verify"),
    "promote": ("/v1/items/{item_id}/promote", None, "promote"),
    "graduate": ("/v1/items/{item_id}/graduate", None, "graduate"),
    "drop": ("/v1/items/{item_id}/drop", None, "drop"),
    "refute": ("/v1/items/{item_id}/refute", None, "refute"),
    "revoke": ("/v1/items/{item_id}/revoke", None, "revoke"),
    "redact": ("/v1/items/{item_id}/redact", None, "redact"),
    "release_skill": ("/v1/skills/{item_id}/release", None, "skill release"),
    "retire_skill": ("/v1/skills/{item_id}/retire", None, "skill retire"),
    "lineage": ("/v1/items/{item_id}/lineage", None, "lineage"),
    "shadow_report": ("/v1/shadow", None, "shadow report"),
    "promotion_candidates": ("/v1/promotion/candidates", None, "promotion candidates"),
    "contested_keys": ("/v1/promotion/contested", None, "promotion contested"),
    "sweep": ("/v1/sweep", None, "sweep"),
    "recall_items": ("/v1/recall", "recall", "recall"),
    "recall_needs": ("/v1/recall", "recall", "recall"),  # refresh: true, --refresh
    "record_use": ("/v1/record-use", "record_use", "recall"),  # recall --record
    "check_context": ("/v1/context/check", "check_context", "context check"),
    "diff": ("/v1/diff", "diff", "diff"),
    "review_queue": ("/v1/review", None, "review"),
    "item_dossier": ("/v1/items/{item_id}/dossier", None, "item dossier"),
    "action_preview": ("/v1/items/{item_id}/preview/{action}", None, "item preview"),
    # a tenant's fact sources (model §2.1): the operator's, no MCP tool
    "load_sources": ("/v1/sources", None, "sources load"),
    "show_sources": ("/v1/sources", None, "sources show"),
    "pull_sources": ("/v1/sources/pull", None, "sources pull"),
    "sources_status": ("/v1/sources/status", None, "sources status"),
    # a tool's webhook; agents do not send hooks: no MCP tool
    "deliver_hook": ("/v1/hooks/{kind}", None, "hooks post"),
    # the transitions inside a window, beside What changed's diff (docs/sme.md)
    "transitions": ("/v1/transitions", None, "transitions"),
    # the tenant's registry (its axes and content types): the operator's, no MCP tool
    "load_registry": ("/v1/registry", None, "registry load"),
    "show_registry": ("/v1/registry", None, "registry show"),
    # episodes rolled up into semantic items: a maintenance job, no MCP tool
    "rollup_preview": ("/v1/rollup", None, "rollup"),  # dry_run: true, --dry-run
    "rollup": ("/v1/rollup", None, "rollup"),
    # an SME's call on a skill, and the citations as the caller may read them: no MCP tool
    "set_enforcement": ("/v1/items/{item_id}/enforcement", None, "skill enforce"),
    "list_citations": ("/v1/citations", None, "citations list"),
    # tenant policy (model §7.1): the operator's and the admin's, no MCP tool
    "policy_show": ("/v1/policy", None, "policy show"),
    "policy_set": ("/v1/policy", None, "policy set"),
    # real erasure (model §7): the operator's, no MCP tool; --dry-run is the preview
    "forget": ("/v1/forget", None, "forget"),
    "forget_preview": ("/v1/forget/preview", None, "forget"),
    # core blocks (model §4): an agent's own through MCP, every block through the rest
    "block_set": ("/v1/blocks/{label}", "block_set", "block set"),
    "block_list": ("/v1/blocks", "block_get", "block list"),
    "block_show": ("/v1/blocks/{label}", "block_get", "block show"),
    # knowledge beside memory (model §6): the team's runbooks, imported by an SME or
    # admin; agents read them through recall, no MCP tool of their own
    "docs_import": ("/v1/docs", None, "docs import"),
    "docs_list": ("/v1/docs", None, "docs list"),
    "docs_show": ("/v1/docs/{document_id}", None, "docs show"),
    "docs_revoke": ("/v1/docs/{document_id}/revoke", None, "docs revoke"),
    "docs_redact": ("/v1/docs/{document_id}/redact", None, "docs redact"),
}


def _commands(group: typer.Typer, prefix: str = "") -> set[str]:
    out = {f"{prefix}{c.name}" for c in group.registered_commands}
    for sub in group.registered_groups:
        assert sub.typer_instance is not None
        out |= _commands(sub.typer_instance, f"{prefix}{sub.name} ")
    return out


@functools.cache
def _tests_text() -> str:
    here = Path(__file__).resolve()
    return "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py") if p != here)


def _runtime() -> use.Runtime:
    """A runtime on no database: the doors' schemas are read without one."""
    return use.Runtime.over(db.make_engine("postgresql+psycopg://x@/x?host=/nonexistent"), "x")


@functools.cache
def _openapi() -> dict[str, Any]:
    return create_app(_runtime()).openapi()


@functools.cache
def _paths() -> frozenset[str]:
    return frozenset(_openapi()["paths"])


@functools.cache
def _tools() -> dict[str, Any]:
    """The MCP tools as a client lists them (the SDK's client, in process)."""

    async def listed() -> dict[str, Any]:
        async with Client(build_server(_runtime(), "cvt1.x.y.z")) as c:
            return {t.name: t for t in (await c.list_tools()).tools}

    return asyncio.run(listed())


@functools.cache
def _doc(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


def test_the_table_names_every_use_case() -> None:
    assert set(DOORS) == set(use.USE_CASES)


@pytest.mark.parametrize("case", sorted(DOORS))
def test_every_use_case_has_its_doors_docs_and_a_test(case: str) -> None:
    route, tool, command = DOORS[case]
    paths = _paths()
    http_doc, agents_doc, cli_doc = _doc("http.md"), _doc("agents.md"), _doc("cli.md")
    tests = _tests_text()
    if route is not None:
        assert route in paths, f"{case}: no route {route}"
        assert f"`{route}" in http_doc or f" {route}`" in http_doc or route in http_doc
    if tool is not None:
        assert tool in TOOLS, f"{case}: no MCP tool {tool}"
        assert f"`{tool}`" in agents_doc, f"{case}: docs/agents.md does not name `{tool}`"
    assert command in _commands(cli), f"{case}: no command `caveat {command}`"
    assert f"caveat {command}" in cli_doc, f"{case}: docs/cli.md has no `caveat {command}`"
    assert _exercised(case, route, tool, command, tests), f"{case}: no test exercises it"


def _exercised(case: str, route: str | None, tool: str | None, command: str, tests: str) -> bool:
    """A test calls the use case, its route (any path parameters), its MCP tool or its
    command."""
    calls = [rf"\buse\.{case}\("]
    if route is not None:
        calls.append(re.sub(r"\\\{[^}]*\\\}", r"\{?[^/\"?]+\}?", re.escape(route)) + r"[\"?]")
    if tool is not None:
        calls.append(rf"call_tool\(\s*\"{tool}\"")
    words = command.split()
    calls.append(r"(run\(|\[)\s*" + r",\s*".join(f'"{w}"' for w in words) + r"[,)\]]")
    return any(re.search(c, tests) for c in calls)


# --- one recall request at every door -----------------------------------------------

#: RecallIn's field -> the name the domain's RecallRequest gives it
_DOMAIN_NAME = {"case": "case_id"}
#: RecallIn's field -> its spelling in GET /v1/recall's query (repeatable, flat strings)
_QUERY_NAME = {"subjects": "subject", "observations": "observe", "anchors": "anchor"}
_QUERY_NAME |= {"pinned": "pin", "sources": "source"}
#: RecallIn's field -> `caveat recall`'s option (the query is its argument)
_CLI_NAME = {"subjects": "--subject", "observations": "--observe", "pinned": "--pin"}
_CLI_NAME |= {"anchors": "--anchor", "query": "query"}
#: the recall fields the context guard takes (it checks given ids, it ranks nothing)
_CONTEXT_FIELDS = {"case"}
#: RecallIn's fields a replay `recall` step does not spell: it asks inside the open case
#: (`open_case`), which the runner passes as `case`
_REPLAY_IMPLIED = {"case"}
#: RecallIn's fields that are the doors' and not the domain's request: a pull from the
#: fact sources before the read (caveat.connectors.recall); a replay step refuses them
#: (replay cannot reach live systems: tests/caveat/replay/test_format_errors.py)
_DOOR_ONLY = {"refresh", "refresh_deadline_ms"}


def _fields() -> set[str]:
    return set(RecallIn.model_fields)


def _schema(ref: dict[str, Any]) -> dict[str, Any]:
    name = ref["$ref"].rsplit("/", 1)[-1]
    schema: dict[str, Any] = _openapi()["components"]["schemas"][name]
    return schema


def _body(path: str) -> set[str]:
    content = _openapi()["paths"][path]["post"]["requestBody"]["content"]
    return set(_schema(content["application/json"]["schema"])["properties"])


def test_the_request_model_is_the_domains_request() -> None:
    """Every field of recall.RecallRequest a caller may set is a field of RecallIn."""
    domain = {f.name for f in dataclasses.fields(recall.RecallRequest)}
    assert {_DOMAIN_NAME.get(f, f) for f in _fields() - _DOOR_ONLY} == domain


def test_get_recall_refuses_exactly_the_parameters_it_does_not_document() -> None:
    """The set the route checks unknown query parameters against is its documented one."""
    from caveat.api._app import _RECALL_PARAMS

    params = _openapi()["paths"]["/v1/recall"]["get"]["parameters"]
    assert {p["name"] for p in params if p["in"] == "query"} == _RECALL_PARAMS


@pytest.mark.parametrize("field", sorted(RecallIn.model_fields))
def test_every_recall_field_reaches_every_door(field: str) -> None:
    get = {p["name"] for p in _openapi()["paths"]["/v1/recall"]["get"]["parameters"]}
    assert _QUERY_NAME.get(field, field) in get, f"GET /v1/recall has no {field}"
    assert field in _body("/v1/recall"), f"POST /v1/recall has no {field}"
    assert field in _body("/v1/record-use"), f"POST /v1/record-use has no {field}"
    tools = _tools()
    for tool in ("recall", "explain", "record_use"):
        if (tool, field) == ("explain", "explain"):
            continue  # the explain tool is recall with explain on
        assert field in tools[tool].input_schema["properties"], f"MCP {tool} has no {field}"
    if field in _CONTEXT_FIELDS:
        assert field in _body("/v1/context/check")
        assert field in tools["check_context"].input_schema["properties"]
    command = typer.main.get_command(cli)
    assert isinstance(command, typer.core.TyperGroup)
    recall_command = command.commands["recall"]
    given = {o for p in recall_command.params for o in (*p.opts, p.name or "")}
    flag = _CLI_NAME.get(field, "--" + field.replace("_", "-"))
    assert flag in given, f"caveat recall has no {flag}"
    if field in _DOOR_ONLY:
        assert field not in RecallArgs.model_fields, f"a replay recall step takes {field}"
    elif field not in _REPLAY_IMPLIED:
        assert field in RecallArgs.model_fields, f"a replay recall step has no {field}"


# --- every schema typed --------------------------------------------------------------


def _untyped(node: Any, where: str = "") -> list[str]:
    """Where ``node`` holds an object schema that says nothing of its fields: no
    properties, and any additional property allowed (``true``, ``{}`` or unsaid)."""
    found: list[str] = []
    if isinstance(node, dict):
        anything = node.get("additionalProperties", True) in (True, {})
        if node.get("type") == "object" and not node.get("properties") and anything:
            found.append(where or "/")
        for key, value in node.items():
            found += _untyped(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _untyped(value, f"{where}/{i}")
    return found


def _named(schema: dict[str, Any]) -> bool:
    """A component by reference, or a list of them."""
    return "$ref" in schema or (schema.get("type") == "array" and "$ref" in schema["items"])


def test_the_untyped_check_notices_an_untyped_schema() -> None:
    assert _untyped({"type": "object", "additionalProperties": True}) == ["/"]
    assert _untyped({"properties": {"a": {"type": "object"}}}) == ["/properties/a"]
    assert _untyped({"type": "object", "additionalProperties": {"type": "string"}}) == []


def test_every_http_body_and_answer_is_a_named_typed_schema() -> None:
    doc = _openapi()
    assert _untyped(doc) == []
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            if "requestBody" in op:
                content = op["requestBody"]["content"]
                if "application/json" in content:
                    schema = content["application/json"]["schema"]
                    named = _named(schema) or all(_named(s) for s in schema.get("anyOf", [{}]))
                    assert named, f"{method} {path}: the body is not a named schema"
                else:  # a text body (PUT /v1/sources: the YAML)
                    kinds = {m.get("schema", {}).get("type") for m in content.values()}
                    assert kinds == {"string"}, f"{method} {path}: the text body is untyped"
            answers = [s for s in op["responses"] if s.startswith("2")]
            assert answers, f"{method} {path}: no answer documented"
            for status in answers:
                content = op["responses"][status].get("content")
                assert content, f"{method} {path} {status}: no answer schema"
                for kind, media in content.items():
                    schema = media.get("schema", {})
                    typed = _named(schema) if kind == "application/json" else bool(schema)
                    assert typed, f"{method} {path} {status}: the answer is not a named schema"


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_input_and_output_is_typed(tool: str) -> None:
    listed = _tools()[tool]
    assert listed.output_schema is not None, f"{tool}: no output schema"
    assert _untyped(listed.input_schema) == [], f"{tool}: input"
    assert _untyped(listed.output_schema) == [], f"{tool}: output"
    assert listed.output_schema.get("title"), f"{tool}: the output schema is not named"


def test_propose_shows_the_proposal_schema() -> None:
    import claims

    schema = _tools()["propose"].input_schema
    ref = schema["properties"]["proposals"]["items"]["$ref"]
    items = schema["$defs"][ref.rsplit("/", 1)[-1]]
    assert items["title"] == "Proposal"
    assert set(items["properties"]) == set(claims.Proposal.model_fields)
    body = _openapi()["components"]["schemas"]["ProposalsIn"]["properties"]["proposals"]
    assert body["items"]["$ref"].endswith("/Proposal")


# --- no public domain action without a door -------------------------------------------

_DOMAIN = ("factgen", "claims", "lifecycle", "recall")

#: Public domain functions that take an actor but are building blocks that other domain
#: functions (or the gate) call, not actions of their own; each with what reaches it.
_BUILDING_BLOCKS = {
    "claims.append": "the audit row of a use case that writes its own (load_sources)",
    "factgen.observe_each": "store_pull, under pull_sources and deliver_hook",
    "claims.consolidate": "lifecycle.consolidate (propose)",
    "claims.get_item": "the domain's reads (item, dossier)",
    "claims.items_as_of": "recall's as-of reads and diff",
    "claims.record_transition": "every lifecycle transition",
    "claims.write_batch": "lifecycle.write_batch (write)",
    "claims.write_item": "lifecycle.write (write)",
    "lifecycle.available_actions": "lifecycle.dossier and preview_action",
    "lifecycle.confidence_of": "lifecycle.dossier and attach_evidence",
    "lifecycle.expire_ttl": "lifecycle.sweep",
    "lifecycle.record_checks": "recall's verify-on-next-use checks",
    "lifecycle.run_checks": "recall's verify-on-next-use checks",
    "lifecycle.transition_many": "the lifecycle's bulk transitions",
    "lifecycle.eligible_for_promotion": "lifecycle.auto_promote and preview_policy",
    "lifecycle.preview_policy": "lifecycle.set_policy (policy_set, its dry run)",
    "claims.blocks_in_play": "recall's core-block prefix (recall_items)",
    "claims.may_read_block": "the block reads and claims.get_item",
    "recall.admits_passage": "the Python twin of recall's passage gates (recall_items)",
    "claims.private_visible": "the private-memory filter (recall SQL, get_item, lifecycle)",
    "claims.team_of": "the caller's team for recall's anchors and blocks, and the block reads",
}

#: Domain actions without a door yet (issue 25 gives each one); a name leaves this set
#: when its use case lands in USE_CASES with its doors.
_NO_DOOR_YET: set[str] = set()


def _domain_actions() -> set[str]:
    """The public functions of the domain packages that act for an actor."""
    import importlib
    import inspect

    found = set()
    for package in _DOMAIN:
        module = importlib.import_module(package)
        for name in module.__all__:
            fn = getattr(module, name)
            if inspect.isfunction(fn) and "actor" in inspect.signature(fn).parameters:
                found.add(f"{package}.{name}")
    return found


def _reached_by_use_cases() -> set[str]:
    """The domain functions a use case of USE_CASES names (or a ``Runtime`` method, which
    the recall use cases call), read from caveat/app's source."""
    import ast

    reached: set[str] = set()
    for path in (ROOT / "caveat" / "app").glob("*.py"):
        tree = ast.parse(path.read_text())
        aliases = {
            a.asname or a.name: a.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for a in node.names
            if a.name in _DOMAIN
        }
        imported = {
            a.asname or a.name: f"{node.module}.{a.name}"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module in _DOMAIN
            for a in node.names
        }
        doors = [
            fn
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and node.name == "Runtime"
            for fn in node.body
            if isinstance(fn, ast.FunctionDef)
        ] + [
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name in use.USE_CASES
        ]
        for fn in doors:  # a call, or a function handed on (the guard's check)
            for ref in ast.walk(fn):
                if isinstance(ref, ast.Attribute) and isinstance(ref.value, ast.Name):
                    if ref.value.id in aliases:
                        reached.add(f"{aliases[ref.value.id]}.{ref.attr}")
                elif isinstance(ref, ast.Name) and ref.id in imported:
                    reached.add(imported[ref.id])
    return reached


def test_no_public_domain_action_escapes_a_door() -> None:
    actions = _domain_actions()
    assert "lifecycle.revoke" in actions and "claims.create_token" in actions  # the reader
    assert set(_BUILDING_BLOCKS) <= actions, "a building block that is no longer public"
    reached = _reached_by_use_cases()
    assert "lifecycle.revoke" in reached and "recall.check_context" in reached
    doorless = actions - reached - set(_BUILDING_BLOCKS)
    assert not doorless - _NO_DOOR_YET, f"without a door: {sorted(doorless - _NO_DOOR_YET)}"
    assert not _NO_DOOR_YET - doorless, f"given a door: {sorted(_NO_DOOR_YET - doorless)}"
