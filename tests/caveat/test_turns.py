"""The server-side extractor (docs/proposals.md, "The server-side extractor"): agent turns
queued in the store, sent by the worker to a real chat-completions server on loopback
(``ChatServer``: a threaded ``http.server`` answering what each test scripts: valid,
malformed, slow, failing), and consolidated through the gate as the agent that
submitted them; at the doors (HTTP with the background round running, MCP, CLI), all
as the application's login role under row-level security."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

import claims
from caveat import app as use
from caveat import connectors, db
from caveat.api import create_app
from caveat.errors import CaveatError, Conflict, InputError, NotFound
from caveat.mcpserver import build_server
from caveat.settings import Settings
from tests.caveat._doors import world
from tests.caveat.test_cli_incident import run
from tests.caveat.test_http import loopback
from tests.conftest import ADMIN

ROOT = Path(__file__).resolve().parents[2]

#: A claim the gate accepts in INC-1: observed, conditional, cited.
GOOD = {
    "kind": "fact",
    "subject": "payment_api",
    "attribute": "pool_exhausted_at_max",
    "object": 20,
    "required": ["config.connection_pool.max eq 20"],
    "excluded": [],
    "evidence": ["E-1"],
    "derived_from": [],
    "epistemic": "observation",
    "content_type": "configuration",
    "text": "The payment API's pool ran out at its maximum of 20.",
    "entities": [],
    "purposes": [],
    "salience": None,
    "valid_from": None,
    "valid_to": None,
    "version": None,
    "test": None,
    "rationale": "the turn reads the pool gauge at 20/20",
}
#: A rule filed as a fact: the gate refuses it (object_is_rule).
RULE = {**GOOD, "attribute": "fix_pool_exhaustion", "object": "restart"}


@dataclass
class Reply:
    """One scripted answer: a chat completion whose content is ``content`` (``message``
    replaces the whole message), or ``status`` with ``body``; after ``delay`` seconds."""

    content: str | None = None
    status: int = 200
    body: Any = None
    message: dict[str, Any] | None = None
    delay: float = 0.0

    def payload(self) -> Any:
        if self.body is not None:
            return self.body
        message = self.message or {"role": "assistant", "content": self.content}
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "m-1",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }


def answer(*proposals: dict[str, Any]) -> Reply:
    return Reply(json.dumps({"proposals": list(proposals)}))


@dataclass
class ChatServer:
    """A chat-completions server on 127.0.0.1: each POST takes the next scripted reply
    (``Reply()`` with an empty list of proposals when the script is empty) and is
    recorded (path, headers, JSON body)."""

    script: deque[Reply] = field(default_factory=deque)
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@contextmanager
def chat_server(port: int = 0) -> Iterator[ChatServer]:
    chat = ChatServer()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            chat.requests.append((self.path, dict(self.headers), json.loads(raw)))
            reply = chat.script.popleft() if chat.script else answer()
            time.sleep(reply.delay)
            payload = reply.payload()
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (a timeout)
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    chat.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield chat
    finally:
        server.shutdown()
        server.server_close()


def settings(url: str | None, **given: Any) -> Settings:
    return Settings(
        extractor_url=url,
        extractor_model="m-1",
        extractor_key="k-secret",
        extractor_timeout=given.pop("timeout", 2.0),
        extractor_attempts=given.pop("attempts", 3),
        extractor_backoff=given.pop("backoff", 0.05),
        **given,
    )


@contextmanager
def runtime(
    db_url: str, url: str | None, *, fresh: bool = True, **given: Any
) -> Iterator[use.Runtime]:
    """Tenant acme (``world``, case INC-1 open, agent agent-ir) as caveat_app, with the
    extractor at ``url``."""
    engine = db.make_app_engine(db_url)
    rt = use.Runtime.over(engine, "acme", settings=settings(url, **given))
    try:
        if fresh:
            world(rt)
            use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"])
        yield rt
    finally:
        engine.dispose()


def agent(rt: use.Runtime) -> claims.Actor:
    token = use.create_token(rt, ADMIN, "agent-ir", role="agent").token
    return use.authenticate(rt, token)[1]


def turn(turn_id: str = "T-1", text: str = "pool gauge 20/20 on payment-api") -> claims.AgentTurn:
    return claims.AgentTurn(turn_id, text, "INC-1", ("E-1",), ("payment-api",))


INC1 = claims.Anchor(axis="case", id="INC-1")


def step(rt: use.Runtime, *, later: float = 0.0) -> list[use.TurnDone]:
    """One worker step with the connector, at the wall clock plus ``later`` seconds (a
    back-off passed without waiting for it)."""
    extract = connectors.ChatExtractor.from_settings(rt.settings)
    assert extract is not None
    at = use.utcnow() + timedelta(seconds=later)
    return use.process_turns(rt, ADMIN, extract=extract, now=lambda: at)


def audit(rt: use.Runtime, action: str) -> list[claims.AuditEntryRecord]:
    return use.audit_entries(rt, ADMIN, action=action)


# --- the worker against scripted answers ---------------------------------------------


def test_a_valid_answer_lands_as_the_agent_with_its_outcomes_and_audit(db_url: str) -> None:
    with chat_server() as chat, runtime(db_url, chat.url) as rt:
        who = agent(rt)
        done = use.submit_turn(rt, who, turn(), scope=INC1)
        assert (done.created, done.record.state, done.record.attempts) == (True, "queued", 0)
        chat.script.append(answer(GOOD, RULE))
        (out,) = step(rt)
        assert (out.turn_id, out.outcome, out.error) == ("T-1", "done", None)
        shown = use.turn_show(rt, who, "T-1")
        assert shown.state == "done" and shown.attempts == 1 and shown.last_error is None
        assert shown.outcomes is not None
        first, second = shown.outcomes
        assert first["outcome"] == "accepted" and first["item_id"] is not None
        assert (second["outcome"], second["code"]) == ("rejected", "object_is_rule")
        item = use.item(rt, ADMIN, first["item_id"])
        assert (item.created_by, item.subject, item.scope_axis, item.scope_id) == (
            "agent-ir", "payment-api", "case", "INC-1",
        )  # fmt: skip
        proposed = audit(rt, "proposed")
        assert [(r.actor, r.detail["source"]) for r in proposed] == [("agent-ir", "turn:T-1")] * 2
        assert [r.actor for r in audit(rt, "applied")] == ["agent-ir"]
        assert [(r.actor, r.code) for r in audit(rt, "rejected")] == [
            ("agent-ir", "object_is_rule")
        ]
        # what the model was asked: one call, the settings' model and key, temperature
        # 0, the schema as a strict response format, the reference prompt, the turn
        ((path, headers, body),) = chat.requests
        assert path == "/v1/chat/completions"
        assert headers["Authorization"] == "Bearer k-secret"
        assert body["model"] == "m-1" and body["temperature"] == 0
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {
                "name": "caveat_proposals",
                "strict": True,
                "schema": claims.proposal_json_schema(),
            },
        }
        system, user = body["messages"]
        assert system == {
            "role": "system",
            "content": claims.reference_prompt(["config.connection_pool.max"], ["E-1"]),
        }
        assert user["role"] == "user"
        assert json.loads(user["content"]) == {
            "turn": "T-1",
            "case": "INC-1",
            "subjects": ["payment-api"],
            "evidence": ["E-1"],
            "text": "pool gauge 20/20 on payment-api",
        }
        assert step(rt, later=3600) == []  # done is done: never sent again


MALFORMED = {
    "not JSON": Reply("the pool ran out, I think"),
    "not proposals": Reply(json.dumps({"claims": [GOOD]})),
    "no content": Reply(None),
    "a refusal": Reply(message={"role": "assistant", "content": None, "refusal": "I can't"}),
    "not a completion": Reply(body="<html>gateway</html>"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_answer_is_one_refused_proposal_and_nothing_else(
    db_url: str, case: str
) -> None:
    with chat_server() as chat, runtime(db_url, chat.url) as rt:
        use.submit_turn(rt, agent(rt), turn(), scope=INC1)
        before = len(use.audit_entries(rt, ADMIN))
        chat.script.append(MALFORMED[case])
        (out,) = step(rt)
        assert out.outcome == "refused" and out.error
        shown = use.turn_show(rt, ADMIN, "T-1")
        assert shown.state == "done" and shown.attempts == 1  # not retried
        assert shown.outcomes is not None
        ((refused,),) = [shown.outcomes]
        assert (refused["outcome"], refused["code"]) == ("rejected", "proposal_invalid")
        assert "holds no proposals" in refused["message"]
        rows = use.audit_entries(rt, ADMIN)[before:]
        assert [(r.action, r.code, r.actor) for r in rows] == [
            ("proposed", None, "agent-ir"),
            ("rejected", "proposal_invalid", "agent-ir"),
        ]
        assert rows[1].detail["proposal_seq"] == rows[0].seq
        assert audit(rt, "applied") == []
        assert len(chat.requests) == 1


def test_a_slow_answer_times_out_is_retried_after_a_back_off_then_lands(db_url: str) -> None:
    with chat_server() as chat, runtime(db_url, chat.url, timeout=0.3, backoff=30) as rt:
        use.submit_turn(rt, agent(rt), turn(), scope=INC1)
        chat.script.extend([Reply(json.dumps({"proposals": [GOOD]}), delay=1.0), answer(GOOD)])
        t0 = time.perf_counter()
        (out,) = step(rt)
        assert time.perf_counter() - t0 < 0.9  # the call gave up at its timeout
        assert out.outcome == "retried" and out.error == "the extractor timed out after 300 ms"
        waiting = use.turn_show(rt, ADMIN, "T-1")
        assert waiting.state == "queued" and waiting.attempts == 1
        assert waiting.last_error == out.error
        assert waiting.next_attempt_at > waiting.updated_at  # backed off: not due at once
        assert step(rt) == []  # not due yet: 30 s ± 25% away
        assert step(rt, later=20) == []
        (again,) = step(rt, later=40)
        assert again.outcome == "done"
        shown = use.turn_show(rt, ADMIN, "T-1")
        assert (shown.state, shown.attempts, shown.last_error) == ("done", 2, None)
        assert shown.outcomes is not None and shown.outcomes[0]["outcome"] == "accepted"
        assert len(audit(rt, "applied")) == 1  # the late answer of the first call: nowhere


def test_server_errors_are_retried_then_failed_and_a_client_error_fails_at_once(
    db_url: str,
) -> None:
    with chat_server() as chat, runtime(db_url, chat.url, attempts=3) as rt:
        who = agent(rt)
        use.submit_turn(rt, who, turn("T-500"), scope=INC1)
        boom = Reply(status=500, body={"error": {"message": "model crashed"}})
        chat.script.extend([boom, Reply(status=429, body={"error": "slow down"}), boom])
        outcomes = [step(rt, later=600 * i)[0].outcome for i in range(3)]
        assert outcomes == ["retried", "retried", "failed"]
        failed = use.turn_show(rt, who, "T-500")
        assert (failed.state, failed.attempts) == ("failed", 3)
        assert failed.last_error == "the extractor answered HTTP 500: model crashed"
        assert failed.outcomes is None and failed.done_at is not None
        assert step(rt, later=7200) == []  # failed is final
        use.submit_turn(rt, who, turn("T-400"), scope=INC1)
        chat.script.append(Reply(status=400, body={"error": {"message": "bad schema"}}))
        (out,) = step(rt, later=7200)
        assert (out.outcome, out.error) == ("failed", "the extractor answered HTTP 400: bad schema")
        assert use.turn_show(rt, who, "T-400").attempts == 1
        assert audit(rt, "proposed") == []  # nothing reached the gate
        assert "k-secret" not in (failed.last_error or "") + (out.error or "")


def test_each_extraction_is_a_span_without_the_turns_text(db_url: str) -> None:
    from caveat import _tracing

    secret = "customer jane.doe@example.com saw the pool at 20/20"
    with chat_server() as chat, runtime(db_url, chat.url) as rt:
        use.submit_turn(rt, agent(rt), turn(text=secret), scope=INC1)
        chat.script.append(answer(GOOD))
        with _tracing.recorder().recording() as exporter:
            (out,) = step(rt)
        spans = exporter.get_finished_spans()
    assert out.outcome == "done"
    (extract,) = [s for s in spans if s.name == "caveat.extract_turn"]
    (parent,) = [s for s in spans if s.name == "caveat.process_turns"]
    assert extract.parent is not None and extract.parent.span_id == parent.context.span_id
    attributes = dict(extract.attributes or {})
    assert attributes["caveat.tenant"] == "acme"
    assert attributes["caveat.turn.outcome"] == "done"
    assert attributes["caveat.turn.attempt"] == 1
    assert isinstance(attributes["caveat.extractor.seconds"], float)
    values = [str(v) for s in spans for v in (s.attributes or {}).values()]
    assert not [v for v in values if "jane.doe" in v or "20/20" in v]


def test_retry_delay_doubles_to_its_cap_with_bounded_jitter() -> None:
    def mid() -> float:
        return 0.5

    assert [use.retry_delay(n, 2.0, rng=mid) for n in (1, 2, 3, 4)] == [2.0, 4.0, 8.0, 16.0]
    assert use.retry_delay(40, 2.0, rng=mid) == 300.0
    assert use.retry_delay(1, 2.0, rng=lambda: 0.0) == 1.5
    assert use.retry_delay(1, 2.0, rng=lambda: 1.0) == 2.5


def test_a_turn_outlives_an_extractor_that_is_down_and_a_restart(db_url: str) -> None:
    with chat_server() as probe:
        port = probe.port  # a port nothing listens on once this server is closed
    with runtime(db_url, f"http://127.0.0.1:{port}/v1") as rt:
        use.submit_turn(rt, agent(rt), turn(), scope=INC1)
        (out,) = step(rt)
        assert out.outcome == "retried" and out.error
        assert out.error.startswith("cannot reach the extractor")
    with chat_server(port) as chat, runtime(db_url, chat.url, fresh=False) as rt:  # restarted
        assert use.turn_show(rt, ADMIN, "T-1").state == "queued"
        chat.script.append(answer(GOOD))
        (out,) = step(rt, later=60)
        assert out.outcome == "done"
        assert use.turn_show(rt, ADMIN, "T-1").attempts == 2


# --- submission: idempotency, validation, visibility, no extractor ----------------------


def test_a_resubmission_is_the_same_turn_and_another_body_a_conflict(db_url: str) -> None:
    with runtime(db_url, "http://127.0.0.1:9/v1") as rt:
        who = agent(rt)
        first = use.submit_turn(rt, who, turn(), scope=INC1)
        again = use.submit_turn(rt, who, turn(), scope=INC1)
        assert (first.created, again.created) == (True, False)
        assert again.record.submitted_at == first.record.submitted_at
        with pytest.raises(Conflict, match="another body"):
            use.submit_turn(rt, who, turn(text="something else"), scope=INC1)
        other = use.authenticate(rt, use.create_token(rt, ADMIN, "agent-2", role="agent").token)[1]
        with pytest.raises(Conflict):  # another agent's turn id: a conflict, nothing more
            use.submit_turn(rt, other, turn(), scope=INC1)
        with pytest.raises(NotFound):  # an agent sees its own turns only
            use.turn_show(rt, other, "T-1")
        assert use.turns_list(rt, other) == []
        assert [t.turn.id for t in use.turns_list(rt, ADMIN)] == ["T-1"]
        with pytest.raises(InputError, match=r"text: at most 32000 characters"):
            use.submit_turn(rt, who, turn("T-2", "x" * 32_001), scope=INC1)
        with pytest.raises(InputError, match=r"evidence\[0\]"):
            use.submit_turn(rt, who, claims.AgentTurn("T-3", "t", "INC-1", ("",)), scope=INC1)
        assert [t.turn.id for t in use.turns_list(rt, ADMIN)] == ["T-1"]


def test_without_an_extractor_a_turn_is_refused_with_its_code(db_url: str) -> None:
    with runtime(db_url, None) as rt:
        with pytest.raises(CaveatError) as refused:
            use.submit_turn(rt, agent(rt), turn(), scope=INC1)
        assert refused.value.code == "extractor_not_configured"
        assert use.turns_list(rt, ADMIN) == []
        source = use.source_actor("prom")
        with pytest.raises(CaveatError) as forbidden:  # who may not write is told that
            use.submit_turn(rt, source, turn(), scope=INC1)
        assert forbidden.value.code == "forbidden"


# --- the doors ----------------------------------------------------------------------


def test_over_http_with_the_background_round_proposals_land_as_the_agent(db_url: str) -> None:
    with chat_server() as chat, runtime(db_url, chat.url) as rt:
        token = use.create_token(rt, ADMIN, "agent-ir", role="agent").token
        chat.script.append(answer(GOOD))
        auth = {"Authorization": f"Bearer {token}"}
        with (
            loopback(create_app(rt, background=0.2)) as base,
            httpx.Client(base_url=base, headers=auth) as c,
        ):
            body = {"id": "T-1", "text": "pool 20/20", "case": "INC-1", "evidence": ["E-1"]}
            sent = c.post("/v1/turns", json=body)
            assert sent.status_code == 202, sent.text
            assert (sent.json()["id"], sent.json()["state"]) == ("T-1", "queued")
            deadline = time.monotonic() + 20
            while (shown := c.get("/v1/turns/T-1").json())["state"] == "queued":
                assert time.monotonic() < deadline, shown
                time.sleep(0.1)
            assert shown["state"] == "done", shown
            (outcome,) = shown["outcomes"]
            assert outcome["outcome"] == "accepted"
            item = c.get(f"/v1/items/{outcome['item_id']}").json()
            assert item["created_by"] == "agent-ir"
            assert c.post("/v1/turns", json=body).status_code == 200  # the same turn
            conflict = c.post("/v1/turns", json={**body, "text": "other"})
            assert (conflict.status_code, conflict.json()["code"]) == (409, "conflict")
            listed = c.get("/v1/turns", params={"state": "done"}).json()
            assert [t["id"] for t in listed["turns"]] == ["T-1"]
            too_long = c.post("/v1/turns", json={**body, "id": "T-2", "text": "x" * 32_001})
            assert too_long.status_code == 422
            assert c.get("/v1/turns/T-2").status_code == 404
            metrics = c.get("/metrics").text
        assert 'caveat_turns_total{outcome="done"} 1.0' in metrics
        assert "caveat_extractor_call_seconds_count 1.0" in metrics
        assert 'caveat_turns_queued{tenant="acme"} 0.0' in metrics


def test_http_without_an_extractor_answers_503(db_url: str) -> None:
    with runtime(db_url, None) as rt:
        token = use.create_token(rt, ADMIN, "agent-ir", role="agent").token
        with loopback(create_app(rt)) as base:
            answer_ = httpx.post(
                f"{base}/v1/turns",
                json={"id": "T-1", "text": "t", "case": "INC-1"},
                headers={"Authorization": f"Bearer {token}"},
            )
        assert answer_.status_code == 503
        assert answer_.json()["code"] == "extractor_not_configured"


def test_the_mcp_tool_queues_a_turn_as_the_agent(db_url: str) -> None:
    with runtime(db_url, "http://127.0.0.1:9/v1") as rt:
        token = use.create_token(rt, ADMIN, "agent-ir", role="agent").token

        async def call() -> Any:
            async with Client(build_server(rt, token)) as c:
                args = {"id": "T-9", "text": "t", "case": "INC-1", "evidence": ["E-1"]}
                return await c.call_tool("submit_turn", args)

        result = asyncio.run(call())
        assert not result.is_error, result
        assert result.structured_content["state"] == "queued"
        assert use.turn_show(rt, ADMIN, "T-9").principal == "agent-ir"


def test_the_cli_submits_shows_lists_and_runs(
    db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with chat_server() as chat, runtime(db_url, chat.url) as rt:
        use.register_principal(rt, ADMIN, "agent-ir", role="agent")
        monkeypatch.setenv("DATABASE_URL", db_url)
        monkeypatch.setenv("CAVEAT_TENANT", "acme")
        monkeypatch.setenv("CAVEAT_EXTRACTOR_URL", chat.url)
        (tmp_path / "turn.txt").write_text("pool 20/20")
        args = ("--case", "INC-1", "--evidence", "E-1", "--as", "agent-ir")
        out = run("turns", "submit", "T-1", str(tmp_path / "turn.txt"), *args, "--json")
        assert json.loads(out.output)["state"] == "queued"
        chat.script.append(answer(GOOD))
        assert "T-1: done" in run("turns", "run").output
        shown = run("turns", "show", "T-1", "--as", "agent-ir").output
        assert "T-1: done after 1 attempt(s), by agent-ir into case:INC-1, 1 accepted" in shown
        listed = json.loads(run("turns", "list", "--state", "done", "--json").output)
        assert [t["id"] for t in listed["turns"]] == ["T-1"]
        assert "--state: one of" in run("turns", "list", "--state", "later", ok=2).output
        monkeypatch.delenv("CAVEAT_EXTRACTOR_URL")
        refused = run("turns", "submit", "T-2", str(tmp_path / "turn.txt"), *args, ok=1)
        assert "extractor_not_configured" in refused.output


def test_the_reference_prompt_in_the_docs_is_the_constant() -> None:
    doc = (ROOT / "docs" / "proposals.md").read_text()
    block = doc.split("## The reference prompt", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    assert block == claims.REFERENCE_PROMPT
    filled = claims.reference_prompt(["a.b", "c"], [])
    assert (
        "Use only these\n   attributes: a.b, c." in filled
        and "cite only these ids: (none)." in filled
    )
