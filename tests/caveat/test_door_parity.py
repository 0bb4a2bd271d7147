"""HTTP and MCP give the same answer to the same request, and every answer is its model.

The same requests go to the HTTP API (httpx) and to the MCP tools over ``/mcp`` (the
SDK's client) on one server under row-level security: a read on the same state answers
the same JSON at both doors, byte for byte; a write answers the same JSON but for what
a second write makes differently (its instants, its case, its new item's id), whose
form must still be the same. Every answer also matches its model of
``caveat.answers`` field for field (no field the model does not name, none it
names missing but the ones a view leaves out by rule), so the documented schemas cannot
drift from what the views send.
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import BaseModel

import claims
from caveat import app as use
from caveat.answers import _answers as out
from tests.caveat._doors import PRECEDENT, QUERY, precedent
from tests.caveat.test_http import Server, client, serving
from tests.caveat.test_mcp_http import POOL, _data, _session
from tests.conftest import ADMIN

#: Fields a view leaves out by rule (``withheld_view``: only for activated_version).
_OPTIONAL = {out.WithheldOut: {"state", "scope", "release_state"}}
_INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def _conforms(model: type[BaseModel], data: Any) -> None:
    """``data`` is ``model``'s JSON field for field, at every depth (as extra="forbid"
    would check, and also no field the model names is missing)."""
    _walk(model.model_validate(data), data)


def _walk(value: Any, raw: Any) -> None:
    if isinstance(value, BaseModel):
        assert isinstance(raw, dict), raw
        names = {(f.alias or n): n for n, f in type(value).model_fields.items()}
        extra = set(raw) - set(names)
        assert not extra, f"{type(value).__name__} does not name {sorted(extra)}"
        absent = set(names) - set(raw) - _OPTIONAL.get(type(value), set())
        assert not absent, f"{type(value).__name__} names {sorted(absent)}, never sent"
        for key, name in names.items():
            if key in raw:
                _walk(getattr(value, name), raw[key])
    elif isinstance(value, list):
        assert isinstance(raw, list) and len(raw) == len(value)
        for v, r in zip(value, raw, strict=True):
            _walk(v, r)
    elif isinstance(value, dict) and isinstance(raw, dict):
        for k, v in value.items():
            _walk(v, raw[k])


def _form(data: Any, case: str) -> Any:
    """A write's answer with what a second write makes differently replaced by its form:
    an instant by its offset's spelling, the case by ``<case>``, a new id by ``<id>``, a
    confidence a close moved by ``<confidence>`` (the second close starts where the first
    left the item)."""
    if isinstance(data, list):
        return [_form(v, case) for v in data]
    if isinstance(data, dict):
        return {
            k: "<id>"
            if k == "item_id"
            else "<confidence>"
            if k in ("before", "after") and isinstance(v, float)
            else _form(v, case)
            for k, v in data.items()
        }
    if isinstance(data, str):
        if m := _INSTANT.match(data):
            return f"<instant{m.group(2)}>"
        return data.replace(case, "<case>")
    return data


def _episode(rt: use.Runtime, required: str, attribute: str, *, to: str) -> int:
    """An episode of case INC-1 about payment-api under ``required``, promoted ``to``."""
    given = {**PRECEDENT, "attribute": attribute, "required": [required]}
    written = use.write(rt, ADMIN, claims.ItemWrite.model_validate(given))
    use.promote(rt, ADMIN, written.item_id, to="shadow")
    if to == "active":
        use.promote(rt, ADMIN, written.item_id, to="active")
    return written.item_id


def _http(c: httpx.Client, method: str, path: str, **kw: Any) -> Any:
    res = c.request(method, path, **kw)
    assert res.status_code in (200, 201), res.text
    return res.json()


def test_http_and_mcp_answer_the_same_json_and_each_answer_is_its_model(db_url: str) -> None:
    with serving(db_url) as s:
        good = precedent(s.rt)
        bad = _episode(s.rt, "config.connection_pool.max eq 50", "raise_restored_at", to="active")
        _episode(s.rt, "config.connection_pool.max eq 20", "shadowed_at", to="shadow")
        runbook = "# Payment API\n\n## Pool exhausted\n\nRestart the pods one at a time.\n"
        use.docs_import(s.rt, ADMIN, [claims.DocumentInput("runbooks/pay.md", runbook)])
        ask = {"query": QUERY, "subjects": ["payment-api"], "case": "INC-1"}
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        window = {"from": "2020-01-01T00:00:00Z", "to": now}
        with client(s, s.agent) as c:
            http_seen = _http(c, "POST", "/v1/observations", json={"observations": [POOL]})
            [mcp_seen] = _mcp(s, [("observe", {"observations": [POOL]})])
            # reads on one state (the pool max is the same fact for both now), a recall
            # as of one instant (its confidence decays with the clock)
            then = {**ask, "as_of": datetime.now(UTC).isoformat()}
            reads_http = [
                _http(c, "POST", "/v1/recall", json=then),
                _http(c, "POST", "/v1/recall", json={**then, "explain": True}),
                _http(c, "POST", "/v1/context/check", json={"items": [good, bad], "case": "INC-1"}),
                _http(c, "POST", "/v1/record-use", json={**ask, "used": [good, bad]}),
                _http(c, "GET", "/v1/diff", params=window),
                _http(c, "POST", "/v1/recall", json={**then, "sources": ["memory", "knowledge"]}),
            ]
            reads_mcp = _mcp(
                s,
                [
                    ("recall", then),
                    ("explain", then),
                    ("check_context", {"items": [good, bad], "case": "INC-1"}),
                    ("record_use", {**ask, "used": [good, bad]}),
                    ("diff", {"from_": window["from"], "to": window["to"]}),
                    ("recall", {**then, "sources": ["memory", "knowledge"]}),
                ],
            )
            case = {"subjects": ["payment-api"]}
            cite = {"influence": "decisive"}
            proposal = {**PRECEDENT, "epistemic": "observation", "text": "Restarted again."}
            proposal.pop("scope")
            writes_http = [
                _http(c, "POST", "/v1/cases", json={"id": "INC-H", **case}),
                _http(c, "POST", "/v1/record-use", json={**ask, "case": "INC-H", "used": [good]}),
                _http(c, "POST", f"/v1/items/{good}/cite", json={"case": "INC-H", **cite}),
                _http(c, "POST", "/v1/proposals", json={"case": "INC-H", "proposals": [proposal]}),
                _http(c, "POST", "/v1/cases/INC-H/close", json={"outcome": "confirmed"}),
            ]
        writes_mcp = _mcp(
            s,
            [
                ("open_case", {"case": "INC-M", **case}),
                ("record_use", {**ask, "case": "INC-M", "used": [good]}),
                ("cite", {"item": good, "case": "INC-M", **cite}),
                ("propose", {"case": "INC-M", "proposals": [proposal]}),
                ("close_case", {"case": "INC-M", "outcome": "confirmed"}),
            ],
        )
    recalled, explained, checked, used, diffed, both = reads_mcp
    for m_, h_ in zip(reads_mcp, reads_http, strict=True):
        assert m_ == h_, _where(m_, h_)
    # what each read shows, so equal is not equally empty
    assert [r["item"]["id"] for r in recalled["items"]] == [good]
    assert recalled["items"][0]["conditions"][0]["observed"]["observed_at"].endswith("Z")
    withheld = {w["id"]: w for w in explained["withheld"]}
    assert set(withheld[bad]) == {"id", "subject", "attribute", "text", "gate", "conditions"}
    assert [c["value"] for c in withheld[bad]["conditions"]] == ["FALSE"]
    assert any(w.get("state") == "shadow" for w in withheld.values()), withheld
    assert checked["dropped"] == {str(bad): "applicability"} and str(bad) in checked["conditions"]
    assert used["used"] == [good] and list(used["refused"]) == [str(bad)]
    assert diffed["from"].startswith("2020-01-01T00:00:00")
    # knowledge beside memory: items tagged memory, the runbook's passage tagged knowledge
    assert [r["source"] for r in both["items"]] == ["memory"]
    [passage] = both["knowledge"]
    ref = claims.passage_ref("runbooks/pay.md", "pool-exhausted")
    assert (passage["source"], passage["ref"]) == ("knowledge", ref)
    assert {o["source"] for o in both["order"]} == {"memory", "knowledge"}
    assert both["knowledge_counts"] == {"considered": 1, "returned": 1}
    _conforms(out.RecallOut, both)
    assert _form(mcp_seen, "") == _form(http_seen, "")
    assert mcp_seen["facts"][0]["observed_at"].endswith("Z")
    opened, recorded, cited, proposed, closed = writes_mcp
    assert opened["status"] == "open" and cited["cited_by"] == "agent-ir"
    assert recorded == {"used": [good], "refused": {}}
    assert proposed["outcomes"][0]["outcome"] == "accepted", proposed
    assert _form(writes_mcp[:3], "INC-M") == _form(writes_http[:3], "INC-H")
    assert _form(proposed["outcomes"], "INC-M") == _form(writes_http[3], "INC-H")
    assert _form(closed, "INC-M") == _form(writes_http[4], "INC-H")
    assert closed["signals"] == {str(good): "support"}
    models = [out.FactsOut, out.RecallOut, out.RecallOut, out.ContextOut, out.UseOut]
    for model, answer in zip(models, [mcp_seen, *reads_mcp[:4]], strict=True):
        _conforms(model, answer)
    for model, answer in zip(
        [out.DiffOut, out.CaseOut, out.UseOut, out.CitationOut, out.OutcomesOut, out.ClosedOut],
        [diffed, *writes_mcp],
        strict=True,
    ):
        _conforms(model, answer)


def _mcp(s: Server, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each call's structured content (one client session), as the agent's token."""
    return [_data(r) for r in asyncio.run(_session(s, s.agent, calls))]


def test_mcp_refuses_what_http_refuses_as_the_request_model_does(db_url: str) -> None:
    """The SDK's argument model would coerce ``"1"`` to 1 and ``"yes"`` to true; the
    tool refuses them as HTTP does (422), naming the field."""
    with serving(db_url) as s:
        bad = [{"pinned": ["1"]}, {"explain": "yes"}]
        with client(s, s.agent) as c:
            statuses = [c.post("/v1/recall", json={"query": QUERY, **b}) for b in bad]
        calls = [("recall", {"query": QUERY, **b}) for b in bad]
        calls += [
            ("check_context", {"items": ["1"]}),
            ("record_use", {"query": QUERY, "used": ["2"]}),
        ]
        results = asyncio.run(_session(s, s.agent, calls))
    assert [r.status_code for r in statuses] == [422, 422]
    assert all(r.is_error for r in results), [r.content for r in results]
    pinned, explain, items, used = (r.content[0].text for r in results)
    assert pinned.startswith("invalid_input: pinned[0]: Input should be a valid integer"), pinned
    assert explain.startswith("invalid_input: explain: Input should be a valid boolean"), explain
    assert items.startswith("invalid_input: items[0]: "), items
    assert used.startswith("invalid_input: used[0]: "), used


def _where(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k, "<absent>") != b.get(k, "<absent>"):
                return _where(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _where(x, y, f"{path}[{i}]")
    return f"{path}: {a!r} != {b!r}"
