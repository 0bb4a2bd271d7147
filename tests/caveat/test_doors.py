"""Every use case of the application layer reaches every door it should: an HTTP route,
an MCP tool (for the agent's loop), a CLI command, an entry in the docs of each, and a
test that exercises it. Each action goes contract -> route -> tool -> command -> docs
-> tests; this table is where a new use case is added, and the test fails until it has
them all."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import typer

from caveat import app as use
from caveat import db
from caveat.api import create_app
from caveat.cli import app as cli
from caveat.mcpserver import TOOLS

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
    "record_use": ("/v1/record-use", "record_use", "recall"),  # recall --record
    "check_context": ("/v1/context/check", "check_context", "context check"),
    "diff": ("/v1/diff", "diff", "diff"),
    "review_queue": ("/v1/review", None, "review"),
    "item_dossier": ("/v1/items/{item_id}/dossier", None, "item dossier"),
    "action_preview": ("/v1/items/{item_id}/preview/{action}", None, "item preview"),
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


@functools.cache
def _paths() -> frozenset[str]:
    rt = use.Runtime.over(db.make_engine("postgresql+psycopg://x@/x?host=/nonexistent"), "x")
    return frozenset(create_app(rt).openapi()["paths"])


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
