"""Events: typed, atomic, de-duplicated by external id, changes become facts."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

import factgen
from predicates import Version
from predicates.errors import (
    Conflict,
    InputError,
    SubjectUnresolved,
    UnknownAttribute,
    ValueTypeError,
)
from tests.conftest import ADMIN, T0, Store


def _counts(store: Store) -> tuple[int, int]:
    with store.engine.connect() as c:
        events = c.execute(sa.text("SELECT count(*) FROM events")).scalar_one()
        facts = c.execute(sa.text("SELECT count(*) FROM facts")).scalar_one()
    return int(events), int(facts)


def _record(store: Store, **kw):  # type: ignore[no-untyped-def]
    with store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=store.tenant)
        kw.setdefault("occurred_at", T0)
        kw.setdefault("now", T0 + timedelta(seconds=5))
        return factgen.record_event(actor=ADMIN, session=s, world=world, **kw)


def test_a_deploy_event_is_stored_typed_and_its_changes_become_facts(store: Store) -> None:
    event = _record(
        store,
        type="deploy",
        subjects=["payment_api", "payments-db", "PaymentAPI-prod"],
        changes={"config.connection_pool.max": 100, "env.postgres.version": "v15.10"},
        source="ci",
        external_id="deploy-1",
    )
    assert event.subjects == ("payment-api", "payments-db")
    assert event.changes["config.connection_pool.max"][0] == 100
    assert event.changes["env.postgres.version"][0] == Version.parse("v15.10")
    assert event.attributes == {"config.connection_pool.max", "env.postgres.version"}
    assert _counts(store) == (1, 4)
    with store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=store.tenant)
        later = T0 + timedelta(minutes=1)
        snap = factgen.build_snapshot(session=s, world=world, subjects=None, at=later)
        [stored] = factgen.events_between(session=s, tenant=store.tenant, since=None, until=T0)
    entry = snap.get("payments-db", "config.connection_pool.max")
    assert entry is not None and entry.value == 100 and entry.source == "event:deploy"
    assert entry.observed_at == T0
    assert stored == event


def test_an_authorisation_event_stores_no_facts_and_needs_a_principal(store: Store) -> None:
    with pytest.raises(InputError, match="principal"):
        _record(store, type="authorisation", subjects=[])
    event = _record(
        store,
        type="authorisation",
        subjects=["payment-api"],
        principal="agent-ir",
        changes={"config.connection_pool.max": 1},
    )
    assert event.principal == "agent-ir"
    assert _counts(store) == (1, 0)


BAD_EVENTS: list[tuple[dict[str, object], type]] = [
    ({"subjects": ["billing-gw"]}, SubjectUnresolved),
    ({"changes": {"config.thread_pool.max": 3}}, UnknownAttribute),
    ({"changes": {"config.connection_pool.max": "20"}}, ValueTypeError),
    ({"type": "reboot"}, InputError),
    ({"subjects": []}, InputError),
    ({"occurred_at": T0.replace(tzinfo=None)}, InputError),
]


def test_a_bad_event_stores_nothing(store: Store) -> None:
    for kw, error in BAD_EVENTS:
        args: dict[str, object] = {
            "type": "config_change",
            "subjects": ["payment-api"],
            "changes": {"config.connection_pool.max": 20},
        }
        args.update(kw)
        with pytest.raises(error) as info:
            _record(store, **args)
        if error is ValueTypeError:
            assert info.value.detail["attribute"] == "config.connection_pool.max"
            assert info.value.detail["expected"] == "int"
        assert _counts(store) == (0, 0)


def test_a_duplicate_external_id_is_a_conflict_and_stores_nothing(store: Store) -> None:
    kw = {"type": "config_change", "subjects": ["payment-api"], "external_id": "ce-1"}
    _record(store, changes={"config.connection_pool.max": 20}, **kw)
    with pytest.raises(Conflict):
        _record(store, changes={"config.connection_pool.max": 30}, **kw)
    assert _counts(store) == (1, 1)
    # without an external id, the same event may be recorded twice
    kw.pop("external_id")
    _record(store, **kw)
    _record(store, **kw)
    assert _counts(store) == (3, 1)


def test_events_between_is_half_open_and_filters(store: Store) -> None:
    for minutes, etype in ((0, "deploy"), (10, "version_change"), (20, "deploy")):
        _record(
            store,
            type=etype,
            subjects=["payments-db" if minutes == 10 else "payment-api"],
            occurred_at=T0 + timedelta(minutes=minutes),
            now=T0 + timedelta(minutes=minutes, seconds=5),
        )
    with store.sessions.begin() as s:

        def between(since, until, **kw):  # type: ignore[no-untyped-def]
            found = factgen.events_between(
                session=s, tenant=store.tenant, since=since, until=until, **kw
            )
            return [(e.occurred_at - T0).seconds // 60 for e in found]

        assert between(None, T0 + timedelta(hours=1)) == [0, 10, 20]
        assert between(T0, T0 + timedelta(minutes=20)) == [10, 20]
        assert between(None, T0 + timedelta(minutes=19)) == [0, 10]
        assert between(None, T0 + timedelta(hours=1), types=["deploy"]) == [0, 20]
        assert between(None, T0 + timedelta(hours=1), subjects=["payments-db"]) == [10]
        assert factgen.events_between(session=s, tenant="other", since=None, until=T0) == []
