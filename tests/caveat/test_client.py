"""``caveat.client`` (docs/client.md): its surface against the server's OpenAPI routes and
error tree, then the client itself over real HTTP (uvicorn on loopback, as caveat_app,
with a token of role agent; an SME's token where an SME acts), and its import in a venv
that holds only httpx and pydantic.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import subprocess
import sys
import typing
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import pytest
from packaging.requirements import Requirement

import caveat.client as cc
import caveat.errors
from caveat.answers import AuditRow, ItemView
from caveat.client._api import Api
from caveat.client._route import Paged, Route
from claims import REASON_GATES
from tests.caveat._doors import QUERY, precedent
from tests.caveat.test_doors import _openapi
from tests.caveat.test_http import Server, serving

ROOT = Path(__file__).resolve().parents[2]
POOL = {"subject": "payment-api", "attribute": "config.connection_pool.max", "value": 20}


def test_the_public_surface_is_pinned() -> None:
    assert cc.__all__ == [
        "CODES",
        "TOKEN_HEADER",
        "AsyncClient",
        "AsyncContext",
        "CaseNotOpen",
        "CaveatError",
        "Client",
        "Conflict",
        "Context",
        "DatabaseError",
        "DocumentError",
        "EventInFuture",
        "Forbidden",
        "GateRejection",
        "IllegalTransition",
        "InputError",
        "NotFound",
        "NotInContext",
        "PredicateSyntaxError",
        "PredicateTypeError",
        "PromotionNeedsConditions",
        "ScenarioError",
        "SkillTestRequired",
        "SubjectUnresolved",
        "TransportError",
        "Unauthenticated",
        "UnexpectedAnswer",
        "UnknownAttribute",
        "ValueTypeError",
    ]


def _routes() -> dict[tuple[str, str], Route[Any, Any]]:
    return {(r.method, r.path): r for r in vars(Api).values() if isinstance(r, Route)}


def _answer(r: Route[Any, Any]) -> Any:
    """The model a client method's answer is read as (``Call[X]``: X)."""
    call = typing.get_type_hints(r.build)["return"]
    return typing.get_args(call)[0]


def _answer_schema(op: dict[str, Any]) -> dict[str, Any]:
    """The schema of an operation's successful answer."""
    ok = next(v for k, v in sorted(op["responses"].items()) if k.startswith("2"))
    content = ok["content"]
    return dict(next(iter(content.values()))["schema"])


def test_every_route_of_the_openapi_document_has_a_method_answering_its_model() -> None:
    doc = _openapi()
    schemas = doc["components"]["schemas"]
    server = {(m.upper(), p): op for p, ops in doc["paths"].items() for m, op in ops.items()}
    client = _routes()
    assert sorted(set(server) - set(client)) == [], "routes the client has no method for"
    assert sorted(set(client) - set(server)) == [], "client methods for no route"
    for key, op in server.items():
        schema, ours = _answer_schema(op), _answer(client[key])
        if schema.get("type") == "array":  # list[OutcomeOut], list[TransitionOut]
            assert typing.get_origin(ours) is list, key
            schema, ours = schema["items"], typing.get_args(ours)[0]
        if "$ref" not in schema:  # /metrics: text
            assert (schema, ours) == ({"type": "string"}, str), key
            continue
        name = schema["$ref"].rsplit("/", 1)[1]
        # the server's class (or its subclass typing a JSON field with a domain model),
        # named alike and with the same fields
        assert name.rsplit("__", 1)[-1] == ours.__name__, (key, name, ours)
        assert ours.__module__.startswith("caveat.answers"), (key, ours)
        fields = {f.alias or n for n, f in ours.model_fields.items()}
        assert set(schemas[name]["properties"]) == fields, key


def test_every_paginated_route_has_an_iterator() -> None:
    paged = {r.route.path for r in vars(Api).values() if isinstance(r, Paged)}
    with_cursor = {
        path
        for path, ops in _openapi()["paths"].items()
        if any(p["name"] == "cursor" for op in ops.values() for p in op.get("parameters", []))
    }
    assert paged == with_cursor


def _server_tree() -> dict[str, type[Exception]]:
    return {
        name: cls
        for name in caveat.errors.__all__
        if isinstance(cls := getattr(caveat.errors, name), type)
        and issubclass(cls, caveat.errors.CaveatError)
    }


def test_the_error_tree_mirrors_the_servers() -> None:
    for name, theirs in _server_tree().items():
        ours = getattr(cc, name, None)
        assert isinstance(ours, type), f"the client has no {name}"
        assert ours.code == theirs.code, name  # type: ignore[attr-defined]
        assert ours.__mro__[1].__name__ == theirs.__mro__[1].__name__, name
    owned = {cls.code: name for name, cls in _server_tree().items()}  # type: ignore[attr-defined]
    for code in caveat.errors.STATUS:
        assert code in cc.CODES, f"the client does not know {code}"
        if code in owned:
            assert cc.CODES[code].__name__ == owned[code], code
        elif caveat.errors.STATUS[code].exit == 2:  # bad input, wherever it is refused
            assert issubclass(cc.CODES[code], cc.InputError), code
        elif REASON_GATES.get(code) is not None:  # a gate's own refusal
            assert cc.CODES[code] is cc.GateRejection, code
    assert set(cc.CODES) == set(caveat.errors.STATUS), "codes the server does not have"


@pytest.fixture
def server(db_url: str) -> Iterator[Server]:
    with serving(db_url) as s:
        yield s


def _sent(log: list[httpx.Request]) -> Any:
    def hook(request: httpx.Request) -> None:
        log.append(request)

    return {"request": [hook]}


def test_the_agent_loop_through_the_client_and_the_guard_dropping_a_revoked_item(
    server: Server,
) -> None:
    item = precedent(server.rt)
    sent: list[httpx.Request] = []
    http = httpx.Client(base_url=server.base, timeout=30, event_hooks=_sent(sent))
    with cc.Client(token=server.agent, http=http) as agent:
        assert agent.consistency_token is None
        assert agent.open_case("INC-7", ["payment-api"]).id == "INC-7"
        facts = agent.observe([POOL])
        assert [f.attribute for f in facts.facts] == ["config.connection_pool.max"]
        token = agent.consistency_token
        assert token  # the write's answer carried the primary's position
        with agent.context("INC-7") as ctx:
            found = ctx.recall(QUERY, subjects=["payment-api"])
            assert [r.item.id for r in found.items] == [item]
            assert isinstance(found.items[0].item, ItemView)
            # the read after the write carried the write's token to the server
            assert sent[-1].url.path == "/v1/recall"
            assert sent[-1].headers[cc.TOKEN_HEADER] == token
            assert ctx.use([item]).used == [item] and ctx.items == [item]
            assert ctx.check(observations=[POOL]).usable == [item]
            assert agent.cite(item, "INC-7", "decisive").item == item
            with cc.Client(server.base, token=server.sme) as sme:
                assert sme.revoke(item, reason="the restart did not help").item.state == "revoked"
            before = agent.consistency_token
            checked = ctx.check(observations=[POOL])
            assert sent[-1].headers[cc.TOKEN_HEADER] == before
            assert checked.dropped == {str(item): "revoked"}
            assert ctx.items == [] and ctx.dropped == {item: "revoked"}
        closed = agent.close_case("INC-7", "confirmed")
        assert closed.status == "closed"
    assert agent.consistency_token != token  # the cite and the close moved it on


def test_refusals_are_the_typed_tree_with_their_code(server: Server) -> None:
    item = precedent(server.rt)
    with cc.Client(server.base, token=server.agent) as agent:
        with pytest.raises(cc.NotFound) as nf:
            agent.item(10**9)
        assert (nf.value.code, nf.value.status) == ("not_found", 404)
        with pytest.raises(cc.Forbidden) as fb:
            agent.verify(item)
        assert (fb.value.code, fb.value.status) == ("forbidden", 403)
        with pytest.raises(cc.ValueTypeError) as vt:
            agent.observe([{**POOL, "value": "twenty"}])
        assert vt.value.code == "fact_type_mismatch" and "int" in vt.value.detail
        assert isinstance(vt.value, cc.InputError)
        agent.open_case("INC-8")
        agent.close_case("INC-8", "rejected")
        with pytest.raises(cc.CaseNotOpen) as closed:
            agent.cite(item, "INC-8", "considered")
        assert closed.value.status == 409
        with pytest.raises(cc.InputError) as bad:
            agent.recall(QUERY, limit=0)
        assert bad.value.code == "invalid_input" and bad.value.extra["errors"] == 1
    with cc.Client(server.base, token="cvt1.nope") as stranger, pytest.raises(cc.Unauthenticated):
        stranger.recall(QUERY)
    with (
        cc.Client("http://127.0.0.1:9", timeout=2) as nowhere,
        pytest.raises(cc.TransportError) as down,
    ):
        nowhere.healthz()
    assert down.value.code == "transport" and isinstance(down.value.__cause__, httpx.HTTPError)


def test_a_paginated_route_iterates_across_pages(server: Server) -> None:
    sent: list[httpx.Request] = []
    http = httpx.Client(base_url=server.base, timeout=30, event_hooks=_sent(sent))
    with cc.Client(token=server.agent, http=http) as agent:
        for n in range(5):
            agent.open_case(f"INC-P{n}")
        whole = agent.audit_page(limit=100)
        assert whole.next is None and len(whole.items) >= 5
        sent.clear()
        rows = list(agent.iter_audit(limit=2))
    assert all(isinstance(r, AuditRow) for r in rows)
    assert [r.seq for r in rows] == [r.seq for r in whole.items]
    assert len(sent) >= -(-len(rows) // 2) >= 3  # one request per page of two, or one more
    cursors = [r.url.params.get("cursor") for r in sent]
    assert (
        cursors[0] is None and len(set(cursors[1:])) == len(cursors) - 1 and None not in cursors[1:]
    )


def test_the_async_client(server: Server) -> None:
    item = precedent(server.rt)

    async def run() -> None:
        async with cc.AsyncClient(server.base, token=server.agent) as agent:
            await agent.open_case("INC-A", ["payment-api"])
            await agent.observe([POOL])
            assert agent.consistency_token
            async with agent.context("INC-A") as ctx:
                found = await ctx.recall(QUERY, subjects=["payment-api"])
                await ctx.use([r.item.id for r in found.items])
                assert ctx.items == [item]
                assert (await ctx.check(observations=[POOL])).usable == [item]
            with pytest.raises(cc.Forbidden):
                await agent.revoke(item, reason="not mine to revoke")
            for n in range(3):
                await agent.open_case(f"INC-A{n}")
            rows = [r.seq async for r in agent.iter_audit(limit=2)]
            assert rows == [r.seq for r in (await agent.audit_page(limit=100)).items]
            assert len(rows) > 2

    asyncio.run(run())


def _closure(*names: str) -> list[metadata.Distribution]:
    """The installed distributions ``names`` need (their requirements without extras)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        dist = metadata.distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = dist
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def test_the_client_imports_in_a_venv_with_only_httpx_and_pydantic(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60
    )
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    dists = _closure("httpx", "pydantic")
    for dist in dists:
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in tops - {"..", "__pycache__"}:
            if not (shelf / top).exists():
                (shelf / top).symlink_to(Path(str(dist.locate_file(top))))
    (site / "client.pth").write_text(f"{shelf}\n{ROOT}\n")
    probe = (
        "import json, sys\n"
        "import caveat.client as cc\n"
        "try:\n    cc.Client('http://127.0.0.1:9', timeout=2).healthz()\n"
        "except cc.TransportError as e:\n    refused = e.code\n"
        "try:\n    import fastapi\n    server = True\n"
        "except ImportError:\n    server = False\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'refused': refused, "
        "'server': server}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run(
        [str(python), "-c", probe],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    seen = json.loads(out.stdout)
    assert seen["refused"] == "transport"
    assert seen["server"] is False, "the venv holds more than httpx and pydantic"
    roots = {m.split(".")[0] for m in seen["modules"]}
    server_side = {"fastapi", "starlette", "sqlalchemy", "sqlmodel", "lark", "psycopg"}
    server_side |= {"torch", "networkx", "predicates", "factgen", "claims", "lifecycle"}
    assert roots & (server_side | {"recall", "uvicorn", "mcp"}) == set()
    assert not [m for m in seen["modules"] if m.startswith(("caveat.app", "caveat.api"))]
    assert {"httpx", "pydantic", "caveat"} <= roots


def test_a_client_method_says_what_its_route_does() -> None:
    for (method, path), r in _routes().items():
        assert inspect.getdoc(r.build), f"{method} {path}: no docstring"


def test_the_example_of_docs_client_md_runs_and_prints_what_the_page_shows(
    server: Server, tmp_path: Path
) -> None:
    fences = re.findall(
        r"^```(\w*)\n(.*?)^```$", (ROOT / "docs" / "client.md").read_text(), re.S | re.M
    )
    [at] = [i for i, (_, body) in enumerate(fences) if body.startswith("# example: client\n")]
    shown = next(body for lang, body in fences[at + 1 :] if lang == "")
    program = tmp_path / "client_example.py"
    program.write_text(fences[at][1])
    item = precedent(server.rt)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
    env |= {"CAVEAT_URL": server.base, "CAVEAT_TOKEN": server.agent, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(program)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert item == 1  # the page names the precedent by its id
    assert done.stdout.splitlines() == shown.splitlines()


def test_the_later_consistency_token_is_kept_when_answers_arrive_out_of_order() -> None:
    """Answers of concurrent writes (``asyncio.gather``) may arrive in either order: the
    client keeps the later WAL position, as the TypeScript client does, never the
    last-arrived; a token that is not a position is taken as given."""
    given = iter(["0/30", "0/10", "1/0", "0/FFFFFFFF", "opaque", "0/1"])

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={"status": "ok", "worker": 1},
            headers={cc.TOKEN_HEADER: next(given)},
        )

    http = httpx.Client(base_url="http://caveat", transport=httpx.MockTransport(answer))
    with cc.Client("http://caveat", token="t", http=http) as c:
        kept = []
        for _ in range(6):
            c.healthz()
            kept.append(c.consistency_token)
    assert kept == ["0/30", "0/30", "1/0", "1/0", "opaque", "0/1"]
