"""What the doors print and take, as a user meets them: a scope is ``"axis:id"`` on the
way out and on the way in (what is read is written back), an invalid item names its
index and field, every value is the predicate language's literal (never the store's
``{"t", "v"}``, never Python's ``False`` or ``0:15:00``), and explain reports a
withheld item compactly with the state that withheld it.

Real HTTP on loopback and the MCP SDK's client over ``/mcp`` (as the application role,
under row-level security, through the helpers of test_http and test_mcp_http), and the
CLI through typer's runner (as test_cli_incident runs it).
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import claims
import factgen
from caveat import app as use
from caveat.app.views import item_view
from predicates import ValueType
from tests.caveat._doors import PRECEDENT, QUERY, precedent
from tests.caveat.test_cli_incident import as_json, run
from tests.caveat.test_cli_incident import world as cli_world  # noqa: F401 (a fixture)
from tests.caveat.test_http import Server, client, serving
from tests.caveat.test_mcp_http import _data, _session
from tests.conftest import ADMIN

#: Attributes of every type the leaks were seen in: a version, a duration's max_age,
#: a bool, a float.
SPECS = [
    factgen.AttributeSpec("release.version", ValueType.parse("version")),
    factgen.AttributeSpec("flags.canary", ValueType.parse("bool")),
    factgen.AttributeSpec(
        "metrics.error_rate", ValueType.parse("float"), max_age=timedelta(minutes=15)
    ),
]
OBSERVED = [
    {"subject": "payment-api", "attribute": "release.version", "value": "v3.1.0"},
    {"subject": "payment-api", "attribute": "flags.canary", "value": False},
    {"subject": "payment-api", "attribute": "metrics.error_rate", "value": 0.12},
]
#: Internal encodings that must reach no answer.
LEAKS = ('"t":', '"v":', "[3, 1]", "[3,1]", "False", "True", "0:15:00", "evidence E-")


def _no_leak(answer: object) -> None:
    text = json.dumps(answer)
    for leak in LEAKS:
        assert leak not in text, (leak, text[:2000])


@pytest.fixture
def server(db_url: str) -> Any:
    with serving(db_url) as s:
        use.declare_schema(s.rt, ADMIN, SPECS)
        yield s


def _writable(view: dict[str, Any]) -> dict[str, Any]:
    """The fields of an item as read that an item write takes."""
    return {k: v for k, v in view.items() if k in claims.ItemWrite.model_fields}


def test_an_item_read_over_http_is_written_back_as_it_was_read(server: Server) -> None:
    item_id = precedent(server.rt)
    with client(server, server.agent) as c:
        read = c.get(f"/v1/items/{item_id}")
        assert read.status_code == 200, read.text
        view = read.json()
        assert view["scope"] == "case:INC-1"
        assert (view["object"], view["object_type"]) == ("E-1", "evidence")
        again = c.post("/v1/items", json=[_writable(view)])
        assert again.status_code == 200, again.text
    # the same key and the same object: a duplicate of what was read, not a new item
    assert again.json()[0]["outcome"] == "duplicate", again.json()


def test_an_invalid_item_in_a_batch_names_its_index_and_field_at_every_door(
    server: Server,
) -> None:
    precedent(server.rt)
    good = {**PRECEDENT, "scope": "case:INC-1", "attribute": "pool_exhausted_at"}
    bad = {**good, "scope": {"axis": "case"}}
    with client(server, server.agent) as c:
        refused = c.post("/v1/items", json=[good, good, good, {**good, "scope": "INC-1"}])
        assert refused.status_code == 422, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        problem = refused.json()
        assert problem["code"] == "invalid_input"
        assert problem["detail"].startswith('items[3].scope: expected "axis:id"'), problem
        nested = c.post("/v1/items", json=[good, bad]).json()
        assert nested["detail"].startswith("items[1].scope.id: "), nested
        # nothing of a refused batch is written (counted below)
        proposed = c.post(
            "/v1/proposals",
            json={"scope": "case:INC-1", "proposals": [_proposal(), {**_proposal(), "kind": 3}]},
        )
        # a proposal off the proposal schema refuses the whole request at the door
        assert proposed.status_code == 422, proposed.text
        assert proposed.json()["code"] == "invalid_input"
        assert proposed.json()["detail"].startswith("proposals[1].kind: "), proposed.json()
    with server.rt.transaction() as s:
        rows = s.connection().exec_driver_sql("SELECT count(*) FROM items").scalar()
    assert rows == 1  # the precedent alone: nothing of a refused batch or request

    calls = [
        ("propose", {"scope": "INC-1", "proposals": [_proposal()]}),
        ("propose", {"scope": "case:INC-1", "proposals": [{**_proposal(), "subject": 1}]}),
    ]
    bad_scope, bad_item = asyncio.run(_session(server, server.agent, calls))
    assert bad_scope.is_error
    assert bad_scope.content[0].text.startswith('invalid_input: scope: expected "axis:id"')
    # a proposal off the schema refuses the call, naming its index and field
    assert bad_item.is_error
    assert bad_item.content[0].text.startswith("invalid_input: proposals[0].subject: ")


def _proposal(**over: Any) -> dict[str, Any]:
    return {
        "kind": "episode",
        "subject": "payment-api",
        "attribute": "restart_restored_service_at",
        "object": "E-1",
        "required": ["config.connection_pool.max eq 20", "release.version gte v3.1"],
        "excluded": [],
        "evidence": ["E-1"],
        "epistemic": "observation",
        "text": "Pool exhausted again after the v3.1 release; a restart restored service.",
    } | over


def test_mcp_takes_an_axis_id_scope_and_answers_in_literals(server: Server) -> None:
    _typed_item(server)
    done, seen, explained = asyncio.run(
        _session(
            server,
            server.agent,
            [
                ("propose", {"scope": "session:s-1", "proposals": [_proposal()]}),
                ("observe", {"observations": OBSERVED}),
                ("explain", {"query": QUERY, "subjects": ["payment-api"], "case": "INC-9"}),
            ],
        )
    )
    outcome = _data(done)["outcomes"][0]
    assert outcome["outcome"] == "accepted", outcome
    assert use.item(server.rt, ADMIN, outcome["item_id"]).scope_id == "s-1"
    facts = {f["attribute"]: f for f in _data(seen)["facts"]}
    assert (facts["release.version"]["value"], facts["flags.canary"]["value"]) == ("v3.1", False)
    answer = _data(explained)
    assert answer["items"] and answer["items"][0]["item"]["scope"] == "case:INC-9"
    for data in (_data(seen), answer):
        _no_leak(data)


def _typed_item(s: Server) -> int:
    """A case item whose object is a float and whose conditions name a version, a bool
    and a float with a max_age, written over HTTP with an ``"axis:id"`` scope."""
    use.open_case(s.rt, ADMIN, "INC-9", subjects=["payment-api"])
    item = {
        "kind": "fact",
        "subject": "payment-api",
        "attribute": "metrics.error_rate",
        "object": 0.12,
        "required": ["release.version gte v3.1", "metrics.error_rate gte 0.1"],
        "excluded": ["flags.canary eq true"],
        "evidence": ["E-1"],
        "scope": "case:INC-9",
        "facets": ["service:payment-api"],
        "text": "Payment API pool exhausted at error rate 0.12 after the v3.1 release.",
    }
    with client(s, s.agent) as c:
        written = c.post("/v1/items", json=[item])
    assert written.status_code == 200 and written.json()[0]["outcome"] == "accepted", written.text
    return int(written.json()[0]["item_id"])


def test_http_answers_use_the_predicate_languages_literals(server: Server) -> None:
    item_id = _typed_item(server)
    with client(server, server.agent) as c:
        seen = c.post("/v1/observations", json={"observations": OBSERVED})
        assert seen.status_code == 201, seen.text
        facts = {f["attribute"]: f for f in seen.json()["facts"]}
        found = c.get(
            "/v1/recall",
            params={"query": QUERY, "subject": "payment-api", "case": "INC-9", "explain": True},
        )
        assert found.status_code == 200, found.text
        item = c.get(f"/v1/items/{item_id}").json()
    assert facts["release.version"] | {"observed_at": None} == {
        "subject": "payment-api",
        "attribute": "release.version",
        "type": "version",
        "value": "v3.1",
        "literal": "v3.1",
        "observed_at": None,
        "source": None,
    }
    assert (facts["metrics.error_rate"]["value"], facts["metrics.error_rate"]["literal"]) == (
        0.12,
        "0.12",
    )
    assert facts["flags.canary"]["value"] is False and facts["flags.canary"]["literal"] == "false"
    assert facts["flags.canary"]["observed_at"].endswith("Z")
    assert (item["object"], item["object_type"], item["scope"]) == (0.12, "float", "case:INC-9")
    assert item["facets"] == ["service:payment-api"]
    recalled = {r["item"]["id"]: r for r in found.json()["items"]}
    assert item_id in recalled, found.json()
    observed = {c["attribute"]: c["observed"] for c in recalled[item_id]["conditions"]}
    assert observed["release.version"]["value"] == "v3.1"
    assert observed["flags.canary"]["literal"] == "false"
    assert observed["metrics.error_rate"]["value"] == 0.12
    for answer in (seen.json(), found.json(), item):
        _no_leak(answer)


def _withheld_world(s: Server, n: int) -> dict[int, str]:
    """``n`` items the agent may see, each withheld for its state: in another case,
    shadow, revoked, needs_reverification (round robin); their states by id."""
    use.open_case(s.rt, ADMIN, "INC-1", subjects=["payment-api"])
    states: dict[int, str] = {}
    for i in range(n):
        w = claims.ItemWrite.model_validate(
            {
                **PRECEDENT,
                "attribute": f"restart_restored_service_at_{i}",
                "text": f"Payment API pool exhausted at max 20 ({i}); a restart restored it.",
            }
        )
        item_id = use.write(s.rt, ADMIN, w).item_id
        assert item_id is not None
        kind = ("case", "shadow", "revoked", "needs_reverification")[i % 4]
        if kind != "case":
            use.promote(s.rt, ADMIN, item_id, to="shadow")
        if kind in ("revoked", "needs_reverification"):
            use.promote(s.rt, ADMIN, item_id, to="active")
        if kind == "revoked":
            use.revoke(s.rt, ADMIN, item_id, reason="wrong pool")
        states[item_id] = kind
    if "needs_reverification" in states.values():
        # a config change re-opens the active ones that depend on it
        use.record_event(
            s.rt,
            ADMIN,
            type="config_change",
            subjects=["payment-api"],
            changes={"config.connection_pool.max": 50},
        )
    return {i: use.item(s.rt, ADMIN, i).state for i in states}


def _inapplicable(s: Server, n: int) -> list[int]:
    """``n`` active items whose condition is FALSE now (the pool is at 50, they need 30)."""
    ids = []
    for i in range(n):
        w = claims.ItemWrite.model_validate(
            {
                **PRECEDENT,
                "attribute": f"pool_exhausted_at_{i}",
                "required": ["config.connection_pool.max eq 30"],
                "text": f"Payment API pool exhausted at max 30 ({i}); a restart restored it.",
            }
        )
        item_id = use.write(s.rt, ADMIN, w).item_id
        assert item_id is not None
        use.promote(s.rt, ADMIN, item_id, to="shadow")
        use.promote(s.rt, ADMIN, item_id, to="active")
        ids.append(item_id)
    return ids


#: Bytes of JSON a withheld item may take in an explain: the entry (its id, subject,
#: attribute, a one-sentence text of ~70 characters, the gate, its state and, for
#: another case's item, the scope: about 235 here) and each condition it reports
#: (the predicate, its value and the observation, ``"provenance": null`` included:
#: about 260; a pulled observation adds its query). The whole record alone takes
#: about 760 bytes here, before its gate verdicts and every condition.
PER_ENTRY, PER_CONDITION = 300, 300


def test_explain_names_the_state_and_reports_a_withheld_item_compactly(server: Server) -> None:
    states = _withheld_world(server, 8)  # the config change puts the pool at 50
    stale = _inapplicable(server, 2)
    use.open_case(server.rt, ADMIN, "INC-2", subjects=["payment-api"])
    assert set(states.values()) == {"case", "shadow", "revoked", "needs_reverification"}, states
    with client(server, server.agent) as c:
        explained = c.get(
            "/v1/recall",
            params={"query": QUERY, "subject": "payment-api", "case": "INC-2", "explain": True},
        )
    assert explained.status_code == 200, explained.text
    reported = {w["id"]: w for w in explained.json()["withheld"]}
    assert set(states) | set(stale) <= set(reported), reported
    for item_id, kind in states.items():
        w = reported[item_id]
        assert w["gate"] == "activated_version"
        assert w["state"] == kind, w  # the state is named beside the gate
        assert "item" not in w and "evidence" not in w and "recorded_at" not in w
        assert w["conditions"] == []  # not why it was withheld
        if kind == "case":
            assert w["scope"] == "case:INC-1"  # which case's item it is
    for item_id in stale:
        w = reported[item_id]
        assert w["gate"] == "applicability" and "state" not in w, w
        (failed,) = w["conditions"]
        assert (failed["condition"], failed["value"]) == (
            "config.connection_pool.max eq 30",
            "FALSE",
        )
        assert (failed["observed"]["value"], failed["observed"]["literal"]) == (50, "50")
    entries = [reported[i] for i in [*states, *stale]]
    size = len(json.dumps(entries).encode())
    bound = sum(PER_ENTRY + PER_CONDITION * len(w["conditions"]) for w in entries)
    assert size <= bound, (size, bound)
    # the bound refuses the whole record (what explain printed before, with the gate
    # verdicts and every condition besides), which alone is larger than an entry's bound
    for i in [*states, *stale]:
        whole = item_view(use.item(server.rt, ADMIN, i)).model_dump(mode="json")
        assert len(json.dumps({"item": whole}).encode()) > PER_ENTRY + PER_CONDITION


def test_the_cli_prints_and_takes_the_same_spellings(cli_world: Path) -> None:  # noqa: F811
    run("schema", "load", str(_schema(cli_world)))
    observed = as_json(
        "observe", "payment-api", "release.version=v3.1.0", "flags.canary=false", "--as", "agent-ir"
    )
    assert [(f["value"], f["literal"]) for f in observed] == [("v3.1", "v3.1"), (False, "false")]
    _no_leak(observed)
    text = run("observe", "payment-api", "flags.canary=false", "--as", "agent-ir").output
    assert "flags.canary = false" in text and "False" not in text

    run("case", "open", "INC-7", "--subject", "payment-api", "--as", "agent-ir")
    good = {
        "kind": "fact",
        "subject": "payment-api",
        "attribute": "release.version",
        "object": "v3.1.0",
        "required": ["flags.canary eq false"],
        "evidence": ["E-1"],
        "scope": "case:INC-7",
        "text": "Payment API ran v3.1 with the canary off.",
    }
    batch = cli_world / "items.json"
    batch.write_text(json.dumps([good, {**good, "scope": "INC-7"}]))
    refused = run("write", str(batch), "--as", "agent-ir", ok=2).output
    assert 'items[1].scope: expected "axis:id"' in refused, refused
    batch.write_text(json.dumps([good]))
    (written,) = as_json("write", str(batch), "--as", "agent-ir")
    assert written["outcome"] == "accepted", written
    shown = as_json("item", "show", str(written["item_id"]), "--as", "agent-ir")
    assert (shown["object"], shown["object_type"], shown["scope"]) == (
        "v3.1",
        "version",
        "case:INC-7",
    )
    batch.write_text(json.dumps([_writable(shown)]))
    (again,) = as_json("write", str(batch), "--as", "agent-ir")
    assert again["outcome"] == "duplicate", again
    dossier = as_json("item", "dossier", str(written["item_id"]), "--as", "agent-ir")
    _no_leak(dossier)
    readable = run("recall", "payment api canary release", "--case", "INC-7", "--as", "agent-ir")
    assert "release.version = v3.1" in readable.output, readable.output
    assert "observed false" in readable.output and "False" not in readable.output


def _schema(where: Path) -> Path:
    path = where / "more-schema.yaml"
    path.write_text(
        "attributes:\n"
        "  - {attribute: release.version, type: version}\n"
        "  - {attribute: flags.canary, type: bool}\n"
        "  - {attribute: metrics.error_rate, type: float, max_age: 15m}\n"
    )
    return path
