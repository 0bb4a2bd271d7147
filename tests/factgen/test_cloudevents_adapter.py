"""CloudEvents: type mapping, subjects, identity, atomic batches."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import factgen
from predicates.errors import (
    Conflict,
    DocumentError,
    SubjectUnresolved,
    UnknownAttribute,
    ValueTypeError,
)
from tests.conftest import T0, Store
from tests.factgen.conftest import count


def _ce(**kw: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "specversion": "1.0",
        "id": "e-1",
        "source": "ci/payments",
        "type": "com.example.deploy",
        "time": "2026-03-01T08:30:00Z",
    }
    event.update(kw)
    return {k: v for k, v in event.items() if v is not None}


def _import(run: Callable[..., Any], payload: Any, **kw: Any) -> Any:
    return run(factgen.import_cloudevents, text=json.dumps(payload), source_name="ev.json", **kw)


@pytest.mark.parametrize(
    ("ce_type", "expected"),
    [
        ("com.caveat.deploy", "deploy"),
        ("io.argo.deploy", "deploy"),
        ("deploy", "deploy"),
        ("com.example.config-change", "config_change"),
        ("com.example.config_change", "config_change"),
        ("com.example.Version-Change", "version_change"),
        ("com.example.authorization", "authorisation"),
        ("com.example.authorisation", "authorisation"),
        ("com.example.build", None),
        ("com.example.deploy.started", None),
    ],
)
def test_event_type_mapping(ce_type: str, expected: str | None) -> None:
    assert factgen.event_type_of(ce_type) == expected


def test_a_batch_is_recorded_with_subjects_changes_and_identity(
    run: Callable[..., Any], world_store: Store
) -> None:
    batch = [
        _ce(data={"subjects": ["payment_api"], "changes": {"config.connection_pool.max": 100}}),
        _ce(
            id="e-2",
            type="com.example.version-change",
            subject="payments-db",
            time="2026-03-01T08:45:00.123456789Z",
            data={"changes": {"env.postgres.version": "15.10"}, "build": "ignored"},
        ),
        _ce(id="e-3", type="com.example.authorization", principal="agent-ir", time=None),
        _ce(id="e-4", type="com.example.build"),
    ]
    result = _import(run, batch, subject="orders-db")
    deploy, version, auth = result.events
    assert deploy.type == "deploy" and deploy.subjects == ("payment-api",)
    assert deploy.external_id == "ci/payments e-1" and deploy.source == "ci/payments"
    assert deploy.occurred_at == datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
    assert version.subjects == ("payments-db",)
    assert version.occurred_at == datetime(2026, 3, 1, 8, 45, 0, 123456, tzinfo=UTC)
    assert auth.type == "authorisation" and auth.principal == "agent-ir"
    assert auth.subjects == ("orders-db",)  # the default subject
    assert auth.occurred_at == T0 + timedelta(seconds=1)  # no time: the import instant
    assert [(s.key, s.reason) for s in result.skipped] == [
        ("com.example.build e-4", "unsupported_type")
    ]
    assert count(world_store, "events") == 3
    assert count(world_store, "facts") == 2  # deploy and version-change changes become facts


def test_a_single_event_object_is_a_batch_of_one(run: Callable[..., Any]) -> None:
    result = _import(run, _ce(subject="payment-api"))
    assert len(result.events) == 1 and result.events[0].changes == {}


BAD_EVENTS = (
    (_ce(specversion="0.3"), DocumentError, "specversion"),
    ({"specversion": "1.0", "id": "x", "type": "deploy"}, DocumentError, "'source'"),
    (_ce(id=""), DocumentError, "id must be"),
    (_ce(time="yesterday"), DocumentError, "time"),
    (_ce(datacontenttype="text/plain"), DocumentError, "JSON"),
    (_ce(data_base64="AAAA"), DocumentError, "binary"),
    (_ce(data=[1]), DocumentError, "data is a JSON object"),
    (_ce(data={"subjects": "payment-api"}), DocumentError, "list of entity names"),
    (_ce(subject="paymnt-api"), SubjectUnresolved, "did you mean"),
    (
        _ce(subject="payment-api", data={"changes": {"config.pool.max": 1}}),
        UnknownAttribute,
        "",
    ),
    (
        _ce(subject="payment-api", data={"changes": {"config.connection_pool.max": "1"}}),
        ValueTypeError,
        "expected int",
    ),
    (_ce(type="deploy"), DocumentError, "names its subjects"),
)


def test_one_bad_event_rejects_the_whole_batch(run: Callable[..., Any], world_store: Store) -> None:
    good = _ce(
        id="good", subject="payment-api", data={"changes": {"config.connection_pool.max": 5}}
    )
    for bad, error, needle in BAD_EVENTS:
        with pytest.raises((error, DocumentError)) as err:
            _import(run, [good, bad])
        assert isinstance(err.value, error), err.value
        assert needle in str(err.value)
        assert count(world_store, "events") == 0
        assert count(world_store, "facts") == 0


def test_errors_point_at_the_event(run: Callable[..., Any]) -> None:
    text = '[\n  {"specversion": "1.0", "id": "a", "source": "s", "type": "deploy",\n' + (
        '   "subject": "payment-api"},\n  {"specversion": "2.0", "id": "b", "source": "s",'
        ' "type": "deploy"}\n]'
    )
    with pytest.raises(DocumentError) as err:
        run(factgen.import_cloudevents, text=text, source_name="ev.json")
    assert err.value.line == 4 and "[1].specversion" in err.value.message
    one = '[\n  {"specversion": "1.0", "id": "a", "source": "s", "type": "deploy",\n' + (
        '   "subject": "nobody"}]'
    )
    with pytest.raises(SubjectUnresolved) as unresolved:
        run(factgen.import_cloudevents, text=one, source_name="ev.json")
    assert str(unresolved.value).startswith("ev.json:2: ")


def test_a_replayed_event_is_a_conflict(run: Callable[..., Any], world_store: Store) -> None:
    _import(run, _ce(subject="payment-api"))
    with pytest.raises(Conflict):
        _import(run, [_ce(id="new", subject="payment-api"), _ce(subject="payment-api")])
    assert count(world_store, "events") == 1
    # the same id from another source is another event
    _import(run, _ce(source="ci/other", subject="payment-api"))
    assert count(world_store, "events") == 2


# --- parse_cloudevent: the reader the CloudEvents hook shares ---------------------------


def test_parse_cloudevent_reads_an_event_as_the_import_does() -> None:
    node = _ce(
        type="dev.argocd.sync.succeeded", time="2026-03-01T09:00:00.123456789Z", subject="api"
    )
    event = factgen.parse_cloudevent(node, now=T0, types={"dev.argocd.sync.succeeded": "deploy"})
    assert isinstance(event, factgen.CloudEvent)
    assert (event.type, event.timed) == ("deploy", True)
    assert event.occurred_at == datetime(2026, 3, 1, 9, 0, 0, 123456, tzinfo=UTC)
    assert event.external_id == f"{node['source']} {node['id']}"
    untimed = factgen.parse_cloudevent(_ce(time=None, subject="api"), now=T0)
    assert isinstance(untimed, factgen.CloudEvent)
    assert (untimed.timed, untimed.occurred_at) == (False, T0)


def test_parse_cloudevent_gives_back_a_type_it_does_not_know() -> None:
    assert factgen.parse_cloudevent(_ce(type="dev.argocd.app.degraded"), now=T0) == (
        "dev.argocd.app.degraded"
    )


def test_parse_cloudevent_says_where_an_event_is_malformed() -> None:
    text = '{\n  "specversion": "1.0",\n  "id": "x",\n  "source": "s",\n  "type": 7\n}'
    with pytest.raises(DocumentError) as err:
        factgen.parse_cloudevent(json.loads(text), now=T0, text=text, source_name="ev.json")
    assert err.value.detail["line"] == 5
    assert "type" in err.value.message
