"""An answer names only the items its caller may read (docs/claims.md, "Access
control"): an event's fan-out (matched, re-opened, verify on next use) and a close's
signals, demotions and confidence moves are the caller's view, as the audit log is;
the admin sees every id. As the application role under row-level security."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import claims
from caveat import app as use
from caveat import db
from caveat.app import views
from predicates.errors import NotFound
from tests.caveat._doors import world
from tests.conftest import ADMIN, T0

#: an agent denied the restricted evidence by a capability it holds, cleared for public
LOW_AGENT = claims.Actor("agent-x", "agent", frozenset({"contractor"}), "public")
LOW_SME = claims.Actor("sme-low", "sme", frozenset(), "public")


@pytest.fixture
def rt(db_url: str) -> Iterator[use.Runtime]:
    engine = db.make_app_engine(db_url)
    runtime = use.Runtime.over(engine, "acme")
    try:
        world(runtime)
        world(runtime.for_tenant("globex"))  # the served fixture's second tenant
        use.open_case(runtime, ADMIN, "INC-1", subjects=["payment-api"], now=T0)
        use.add_evidence(runtime, ADMIN, "E-open")
        use.add_evidence(
            runtime, ADMIN, "E-secret", classification="restricted", deny=["cap:contractor"]
        )
        yield runtime
    finally:
        engine.dispose()


def _active(rt: use.Runtime, evidence: str, attribute: str) -> int:
    body = {
        "kind": "fact",
        "subject": "payment_api",
        "attribute": attribute,
        "object": "20",
        "required": ["config.connection_pool.max eq 20"],
        "evidence": [evidence],
        "scope": {"axis": "case", "id": "INC-1"},
        "content_type": "configuration",
        "text": f"{attribute} holds",
    }
    item_id = use.write(rt, ADMIN, claims.ItemWrite.model_validate(body), now=T0).item_id
    assert item_id is not None
    use.promote(rt, ADMIN, item_id, to="shadow", now=T0)
    use.promote(rt, ADMIN, item_id, to="active", now=T0)
    return item_id


def _cited(rt: use.Runtime, evidence: str, attribute: str) -> int:
    body = {
        "kind": "fact",
        "subject": "payment_api",
        "attribute": attribute,
        "object": "x",
        "evidence": [evidence],
        "scope": {"axis": "case", "id": "INC-1"},
        "text": f"{attribute} noted",
    }
    item_id = use.write(rt, ADMIN, claims.ItemWrite.model_validate(body), now=T0).item_id
    assert item_id is not None
    use.cite(rt, ADMIN, "INC-1", item_id, influence="decisive", now=T0)
    return item_id


def _named(view: dict[str, object]) -> set[int]:
    [event] = view["events"]  # type: ignore[index]
    return {
        int(i) for k in ("matched", "needs_reverification", "verify_on_next_use") for i in event[k]
    }


@pytest.mark.parametrize("who", [LOW_AGENT, ADMIN], ids=["low-agent", "admin"])
def test_an_events_answer_names_only_what_its_sender_may_read(
    rt: use.Runtime, who: claims.Actor
) -> None:
    hidden, shown = _active(rt, "E-secret", "pool_secret"), _active(rt, "E-open", "pool_note")
    with pytest.raises(NotFound):
        use.item(rt, LOW_AGENT, hidden)
    res = use.record_event(
        rt,
        who,
        type="config_change",
        subjects=["payment-api"],
        changes={"config.connection_pool.max": 30},
        now=T0,
    )
    named = _named(views.event_view(res))
    assert shown in named
    assert (hidden in named) is (who is ADMIN)
    # the handling itself is the same for everyone: both were re-opened
    assert {use.item(rt, ADMIN, i).state for i in (hidden, shown)} == {"needs_reverification"}


def test_a_hooks_answer_names_no_item(rt: use.Runtime) -> None:
    _active(rt, "E-open", "pool_note")
    delivered = use.deliver_hook(
        rt,
        kind="github",
        actor=use.source_actor("github"),
        actions=[
            use.PostEvent(
                "deploy", ("payment_api",), T0, changes={"config.connection_pool.max": 100}
            )
        ],
        delivery_id="d-1",
        now=T0,
    )
    [done] = delivered.done
    assert done["action"] == "event" and done["affected"] == []


@pytest.mark.parametrize("who", [LOW_SME, ADMIN], ids=["low-sme", "admin"])
def test_a_closes_answer_names_only_the_cited_items_its_closer_may_read(
    rt: use.Runtime, who: claims.Actor
) -> None:
    hidden, shown = _cited(rt, "E-secret", "secret_note"), _cited(rt, "E-open", "open_note")
    view = views.closed_view(use.close_case(rt, who, "INC-1", outcome="confirmed", now=T0))
    signals = {int(i) for i in view["signals"]}
    moved = {int(i) for i in view["confidence"]}
    assert shown in signals and shown in moved
    assert (hidden in signals) is (who is ADMIN)
    assert (hidden in moved) is (who is ADMIN)


# --- a window at the ends of time is a window, not a 500 ---------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"to": "0001-01-01T00:00:00Z"},  # the default week before it is before year 1
        {"from": "2026-01-01T00:00:00Z", "to": "9999-12-31T23:59:59.999999Z"},  # the last µs
    ],
)
def test_transitions_at_the_ends_of_time_answer(rt: use.Runtime, params: dict[str, str]) -> None:
    from tests.caveat.test_sources_doors import _client, served

    with served(rt) as s, _client(s, "sme") as c:
        r = c.get("/v1/transitions", params=params)
    assert r.status_code == 200, r.text
    assert isinstance(r.json(), list)


def test_what_changed_before_year_one_is_an_empty_window(rt: use.Runtime) -> None:
    from datetime import UTC, datetime

    at = datetime(1, 1, 1, tzinfo=UTC)
    seen = use.changes(rt, LOW_SME, to=at, now=T0)
    assert (seen.became, seen.stopped, seen.transitions) == ((), (), ())
