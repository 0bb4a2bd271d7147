"""The renderer every door prints through (caveat.app.views): typed values as the
predicate language's literals, an item's object as a writer gives it, a scope as
``"axis:id"``, and explain's compact withheld entry. No database: records are built."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import pytest
from fastapi import Body, FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from pydantic import ValidationError

import claims
import factgen
import lifecycle
import recall
from caveat.app._input import first_error, item_writes, proposal_anchor
from caveat.app.views import (
    condition_line,
    condition_view,
    item_view,
    object_text,
    typed_value,
    withheld_view,
)
from claims import error_path
from predicates import Duration, Truth, ValueType, Version, coerce, encode
from predicates.errors import InputError

AT = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("raw", "vtype", "value", "literal"),
    [
        (20, "int", 20, "20"),
        (0.12, "float", 0.12, "0.12"),
        (20, "float", 20.0, "20.0"),
        (False, "bool", False, "false"),
        ("canary", "string", "canary", '"canary"'),
        ("blue", "enum[blue,green]", "blue", '"blue"'),
        ("v3.1.0", "version", "v3.1", "v3.1"),
        ("15m", "duration", "15m", "15m"),
        (900, "duration", "15m", "15m"),
        ("2026-12-03T11:00:00+01:00", "timestamp", "2026-12-03T10:00:00Z", "2026-12-03T10:00:00Z"),
    ],
)
def test_a_typed_value_is_json_native_or_its_literal_with_the_literal_beside(
    raw: object, vtype: str, value: object, literal: str
) -> None:
    t = ValueType.parse(vtype)
    shown = typed_value(coerce(raw, t), t)
    assert shown == {"type": t.name, "value": value, "literal": literal}
    assert type(shown["value"]) is type(value)  # 0.12 a number, false a boolean
    # what is shown can be given back: the value reads as the same typed value
    assert coerce(shown["value"], t) == coerce(raw, t)


def test_no_internal_encoding_reaches_a_rendered_value() -> None:
    t = ValueType.parse("version")
    text = json.dumps(typed_value(Version((3, 1)), t))
    assert '"t"' not in text and "[3, 1]" not in text and "v3.1" in text
    d = typed_value(Duration(900), ValueType.parse("duration"))
    assert "0:15:00" not in json.dumps(d) and d["literal"] == "15m"


def _record(**over: Any) -> claims.ItemRecord:
    base: dict[str, Any] = {
        "id": 7,
        "tenant_id": "acme",
        "kind": "fact",
        "subject": "payment-api",
        "attribute": "metrics.error_rate",
        "object": {"value": encode(0.12, ValueType.parse("float"))},
        "required": ("config.connection_pool.max eq 20", "release.version gte v3.1"),
        "excluded": ("flags.canary eq true",),
        "conditions": {},
        "evidence": ("E-901",),
        "derived_from": (),
        "epistemic": "observation",
        "content_type": "configuration",
        "scope_axis": "case",
        "scope_id": "INC-902",
        "purposes": (),
        "acl": (),
        "text": "Error rate 0.12 while the pool was at max 20.",
        "entities": (),
        "salience": 0.5,
        "valid_from": AT,
        "valid_to": None,
        "recorded_at": AT,
        "superseded_at": None,
        "superseded_by": None,
        "state": "case",
        "verified_by": None,
        "verified_at": None,
        "version": None,
        "release_state": None,
        "created_by": "agent-ir",
        "facets": (("service", "payment-api"),),
    }
    return claims.ItemRecord(**(base | over))


def test_an_items_object_is_what_a_writer_gives_and_its_scope_is_axis_id() -> None:
    typed = item_view(_record()).model_dump(mode="json")
    assert typed["object"] == 0.12 and typed["object_type"] == "float"
    assert typed["scope"] == "case:INC-902" and typed["facets"] == ["service:payment-api"]
    assert object_text(typed) == "0.12"
    version = item_view(_record(object={"value": encode("v3.1.0", ValueType.parse("version"))}))
    assert (version.object, version.object_type, object_text(version)) == (
        "v3.1",
        "version",
        "v3.1",
    )
    ref = item_view(_record(object={"evidence": "E-901"})).model_dump(mode="json")
    assert (ref["object"], ref["object_type"]) == ("E-901", "evidence")
    assert object_text(ref) == "evidence E-901"
    loose = item_view(_record(object={"value": "canary"}))  # an undeclared attribute
    assert (loose.object, loose.object_type, object_text(loose)) == ("canary", None, '"canary"')


def test_what_is_read_can_be_written_back() -> None:
    view = item_view(_record(object={"evidence": "E-901"})).model_dump(mode="json")
    fields = claims.ItemWrite.model_fields
    again = claims.ItemWrite.model_validate(
        {k: v for k, v in view.items() if k in fields and k not in ("version",)}
    )
    assert (again.scope.axis, again.scope.id) == ("case", "INC-902")
    assert [str(f) for f in again.facets] == ["service:payment-api"]
    assert again.object == "E-901" and again.object in again.evidence


def _cv(text: str, which: str, truth: Truth, value: object, vtype: str) -> lifecycle.ConditionValue:
    t = ValueType.parse(vtype)
    attribute = text.split(maxsplit=1)[0]
    entry = factgen.SnapshotEntry("payment-api", attribute, coerce(value, t), t, AT, "prom")
    return lifecycle.ConditionValue(text, which, truth, "payment-api", attribute, entry)


def test_a_conditions_observation_is_rendered_by_the_one_renderer() -> None:
    c = _cv("flags.canary eq true", "excluded", Truth.FALSE, False, "bool")
    shown = condition_view(c)
    assert shown["observed"] == {
        "type": "bool",
        "value": False,
        "literal": "false",
        "observed_at": "2026-12-03T10:00:00Z",
        "source": "prom",
        "inline": False,
        "provenance": None,
    }
    line = condition_line(shown)
    assert "observed false at 2026-12-03 10:00" in line and "False" not in line
    # a pulled observation says where it came from: the source's query and sample time
    query = "max by (service) (db_pool_in_use / db_pool_max)"
    pulled = dataclasses.replace(
        c,
        observed=dataclasses.replace(
            c.observed,  # type: ignore[type-var]
            provenance={"source": "prom", "query": query, "sample_time": "2026-12-03T10:00:00Z"},
        ),
    )
    shown = condition_view(pulled)
    assert shown["observed"]["provenance"] == {
        "source": "prom",
        "query": query,
        "sample_time": "2026-12-03T10:00:00Z",
    }
    assert condition_line(shown).endswith(f"(from prom: {query})")
    v = condition_view(_cv("release.version gte v3.1", "required", Truth.TRUE, "v3.1.0", "version"))
    assert v["observed"]["value"] == "v3.1" and '"t"' not in json.dumps(v)


def _withheld(record: claims.ItemRecord, gate: str, state: str | None) -> recall.Withheld:
    values = (
        _cv("config.connection_pool.max eq 20", "required", Truth.FALSE, 50, "int"),
        _cv("release.version gte v3.1", "required", Truth.TRUE, "v3.2", "version"),
        lifecycle.ConditionValue(
            "flags.canary eq true", "excluded", Truth.UNKNOWN, "payment-api", "flags.canary", None
        ),
    )
    return recall.Withheld(record, gate, state, values, (("activated_version", False),))


def test_a_withheld_item_is_compact_with_its_state_and_its_blocking_conditions() -> None:
    w = withheld_view(_withheld(_record(), "activated_version", "case"))
    assert w == {
        "id": 7,
        "subject": "payment-api",
        "attribute": "metrics.error_rate",
        "text": "Error rate 0.12 while the pool was at max 20.",
        "gate": "activated_version",
        "state": "case",
        "scope": "case:INC-902",  # another case's item says which case
        "conditions": w["conditions"],
    }
    # only what failed (FALSE required) or was UNKNOWN; the TRUE one is left out
    assert [(c["condition"], c["value"]) for c in w["conditions"]] == [
        ("config.connection_pool.max eq 20", "FALSE"),
        ("flags.canary eq true", "UNKNOWN"),
    ]
    assert w["conditions"][0]["observed"]["value"] == 50
    revoked = withheld_view(_withheld(_record(state="revoked"), "activated_version", "revoked"))
    assert revoked["state"] == "revoked" and "scope" not in revoked
    # a gate other than activated_version names no state
    assert "state" not in withheld_view(
        _withheld(_record(state="active"), "applicability", "active")
    )


def test_a_scope_is_written_axis_id_and_the_object_form_is_still_read() -> None:
    assert str(claims.Anchor.model_validate("session:a:b")) == "session:a:b"  # first colon
    assert claims.Anchor.model_validate({"axis": "case", "id": "X"}) == claims.Anchor(
        axis="case", id="X"
    )
    assert claims.Anchor(axis="tenant", id="*").model_dump() == "tenant:*"  # never the object
    for bad in ("INC-1", ":x", "case:", 5):
        with pytest.raises(ValidationError, match='expected "axis:id"'):
            claims.Anchor.model_validate(bad)
    schema = claims.ItemWrite.model_json_schema()["$defs"]["Anchor"]
    assert schema["anyOf"][0]["type"] == "string"  # the string form first
    assert schema["anyOf"][1]["type"] == "object"


def test_an_invalid_item_names_its_index_and_field() -> None:
    good = {
        "kind": "fact",
        "subject": "s",
        "attribute": "a",
        "object": 1,
        "evidence": ["E"],
        "scope": "case:INC-1",
    }
    with pytest.raises(InputError) as caught:
        item_writes([good, good, good, {**good, "scope": "INC-1"}])
    assert caught.value.message.startswith('items[3].scope: expected "axis:id"')
    with pytest.raises(InputError, match=r"^items\[1\]\.facets\[0\]: expected"):
        item_writes([good, {**good, "facets": ["x"]}])
    assert error_path(("body", 3, "scope")) == "items[3].scope"
    assert error_path(("query", "limit")) == "query.limit"
    assert error_path(("body", "proposals", 1, "object", "str")) == "proposals[1].object"
    assert error_path(("anchors", 0, "constrained-str")) == "anchors[0]"
    assert error_path(("body", "anchors", 0, "AnchorObject", "weight")) == "anchors[0].weight"
    assert error_path(("body", "list[CloudEventIn]", 1, "id")) == "items[1].id"


def test_a_refusal_names_the_member_of_a_union_that_the_value_took() -> None:
    """An anchor given as an object with a weight out of bounds is refused for its weight,
    not as "should be a valid string" (the union's first member); a string anchor that
    is not "axis:id" is refused with the one spelling of a scope, as a scope is."""
    from pydantic import ValidationError

    from caveat.app._input import first_error
    from caveat.app._requests import RecallIn

    with pytest.raises(ValidationError) as heavy:
        RecallIn.model_validate(
            {"query": "q", "anchors": [{"axis": "case", "id": "I", "weight": 9}]}
        )
    assert first_error(heavy.value.errors()).startswith("anchors[0].weight: Input should be less")
    with pytest.raises(ValidationError) as bare:
        RecallIn.model_validate({"query": "q", "anchors": ["nocolon"]})
    assert first_error(bare.value.errors()) == (
        """anchors[0]: expected "axis:id" (e.g. "case:INC-902"), got 'nocolon'"""
    )
    assert error_path(("observations", 0, "value", "function-after[x()]")) == (
        "observations[0].value"
    )


def test_proposals_are_anchored_by_case_or_by_one_axis_id_scope() -> None:
    assert str(proposal_anchor("INC-1", None)) == "case:INC-1"
    assert str(proposal_anchor(None, "session:s-1")) == "session:s-1"
    with pytest.raises(InputError, match="exactly one"):
        proposal_anchor("INC-1", "session:s-1")
    with pytest.raises(InputError, match=r'^scope: expected "axis:id"'):
        proposal_anchor(None, "s-1")


def test_a_durations_hint_is_a_duration_literal() -> None:
    unknown = lifecycle.ConditionNow(
        lifecycle.ConditionValue(
            "metrics.pool_utilisation gte 0.8",
            "required",
            Truth.UNKNOWN,
            "payment-api",
            "metrics.pool_utilisation",
            None,
        ),
        None,
        True,
        timedelta(minutes=15),
    )
    assert unknown.to_observe is not None and "counts for 15m" in unknown.to_observe
    assert "0:15:00" not in unknown.to_observe


def test_stored_detail_is_shown_with_literals_and_axis_id_anchors() -> None:
    from caveat.app.views import plain

    stored = {
        "request": {
            "object": {"value": encode("v3.1.0", ValueType.parse("version"))},
            "scope": {"axis": "case", "id": "INC-1"},
            "facets": [{"axis": "service", "id": "payment-api"}],
            "salience": 0.5,
        },
        "changes": {"max_age": {"t": "duration", "v": 900}},
        "odd": {"t": "nonsense", "v": 1},
    }
    shown = plain(stored)
    assert shown["request"]["object"]["value"] == {
        "type": "version",
        "value": "v3.1",
        "literal": "v3.1",
    }
    assert shown["request"]["scope"] == "case:INC-1"
    assert shown["request"]["facets"] == ["service:payment-api"]
    assert shown["changes"]["max_age"]["literal"] == "15m"
    assert shown["odd"] == {"t": "nonsense", "v": 1}  # not an encoding: left as it is


def test_the_cli_explain_text_names_the_state_and_the_blocking_values() -> None:
    from caveat.cli._incident import render_recall

    answer = {
        "pinned": [],
        "items": [],
        "withheld": [withheld_view(_withheld(_record(), "activated_version", "case"))],
        "missing_observations": [],
        "source_errors": [
            {"source": "prom", "error": "timed out after 500 ms", "attributes": ["m.u"]}
        ],
        "packed": None,
    }
    lines = render_recall(answer, None)
    assert lines[1].startswith("withheld [7] by activated_version (case in case:INC-902): ")
    assert any("-> FALSE" in line and "observed 50 at" in line for line in lines), lines
    assert lines[-1] == "source prom failed: timed out after 500 ms (asked for m.u)"


def test_a_typed_item_body_names_the_string_form_first_and_the_index_of_a_bad_item() -> None:
    """For a door whose body is typed ``list[ItemWrite]``: the OpenAPI schema of a scope
    names ``"axis:id"`` first, and the framework's refusal reads ``items[3].scope``."""
    api = FastAPI()

    @api.post("/items")
    def write(body: Annotated[list[claims.ItemWrite], Body()]) -> list[str]:
        return [str(w.scope) for w in body]

    @api.exception_handler(RequestValidationError)
    async def refused(_: object, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": first_error(exc.errors())}, 422)

    c = TestClient(api)
    schemas = c.get("/openapi.json").json()["components"]["schemas"]
    anchor = schemas.get("Anchor-Input", schemas.get("Anchor"))
    assert anchor["anyOf"][0]["type"] == "string"
    good = {"kind": "fact", "subject": "s", "attribute": "a", "object": 1, "scope": "case:X"}
    assert c.post("/items", json=[good]).json() == ["case:X"]
    bad = c.post("/items", json=[good, good, good, {**good, "scope": "X"}]).json()
    assert bad["detail"].startswith('items[3].scope: expected "axis:id"'), bad
