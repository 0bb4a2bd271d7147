"""Private memory (model §4 "Private memory"; docs/agents.md): an agent's lessons on its
own ``agent`` anchor and a session's working memory, admitted by the state gate without
promotion to their owner alone; session ownership; the working-memory TTL (exactly at
``recorded_at + ttl`` an item is gone) and its sweep; the one SQL rule and its Python
twin, held to each other."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

import claims
import lifecycle
import recall
from claims import _queries as cq
from predicates.errors import NotFound
from recall import _queries as rq
from recall._recall import admits_private
from tests.conftest import ADMIN, T0, Store
from tests.recall.test_recall import _activate, _write, ids, withheld

TTL = timedelta(hours=1)  # the tenant default (factgen TenantPolicy.working_memory_ttl)
US = timedelta(microseconds=1)


def _note(store: Store, actor: claims.Actor, scope: str, now: datetime = T0, **kw: Any) -> Any:
    request = claims.ItemWrite.model_validate(
        {
            "kind": "episode",
            "subject": "payment-api",
            "attribute": "current_hypothesis",
            "object": kw.pop("object", "pool saturation"),
            "evidence": ["E-1"],
            "scope": scope,
            "text": "Working hypothesis: payment-api tail latency is pool saturation.",
            **kw,
        }
    )
    return lifecycle.write_batch(
        sessions=store.sessions, tenant=store.tenant, requests=[request], actor=actor, now=now
    ).outcomes[0]


def _ask(store: Store, actor: claims.Actor, at: datetime, **kw: Any) -> recall.RecallResult:
    req = recall.RecallRequest(
        **{"query": "payment-api tail latency hypothesis", "explain": True, **kw}
    )
    with store.sessions.begin() as s:
        return recall.recall(session=s, tenant=store.tenant, actor=actor, request=req, now=at)


def _guard(store: Store, actor: claims.Actor, item: int, at: datetime, session: str | None) -> Any:
    with store.sessions.begin() as s:
        return recall.check_context(
            session=s,
            tenant=store.tenant,
            actor=actor,
            item_ids=[item],
            case_id=None,
            now=at,
            session_id=session,
        )


def _use(store: Store, actor: claims.Actor, item: int, at: datetime, session: str | None) -> Any:
    req = recall.RecallRequest(query="hypothesis", session=session)
    with store.sessions.begin() as s:
        return recall.record_use(
            session=s, tenant=store.tenant, actor=actor, request=req, used=[item], now=at
        )


# --- ownership -------------------------------------------------------------------------


def test_a_session_belongs_to_its_first_writer_and_refuses_everyone_else(store: Store) -> None:
    first = _note(store, store.agent, "session:run-1")
    assert first.outcome == "accepted" and first.state == "case"
    again = _note(store, store.agent, "session:run-1", object="connection leak")
    assert again.outcome == "accepted" and again.superseded == first.item_id  # by key
    refused = _note(store, store.outsider, "session:run-1", object="disk full")
    assert (refused.outcome, refused.code) == ("rejected", "axis_not_writable")
    assert refused.error.detail["anchor"] == "session:run-1"
    # the refusal names the anchor, never the owner
    assert store.agent.id not in refused.message
    assert store.agent.id not in repr(refused.error.detail)
    with store.sessions.begin() as s:
        owners = cq.session_owners(session=s, tenant=store.tenant, ids=["run-1"])
        audit = s.execute(
            sa.text(
                "SELECT code, detail FROM audit_log WHERE tenant_id = :t AND code = "
                "'axis_not_writable' ORDER BY seq"
            ),
            {"t": store.tenant},
        ).all()
    assert owners == {"run-1": store.agent.id}
    assert len(audit) == 1 and store.agent.id not in str(audit[0].detail)


def test_a_refused_write_claims_no_session(store: Store) -> None:
    bad = _note(store, store.outsider, "session:run-2", evidence=["E-missing"])
    assert bad.outcome == "rejected" and bad.code != "axis_not_writable"
    assert _note(store, store.agent, "session:run-2").outcome == "accepted"
    with store.sessions.begin() as s:
        assert cq.session_owners(session=s, tenant=store.tenant, ids=["run-2"]) == {
            "run-2": store.agent.id
        }


def test_an_agent_writes_to_its_own_agent_anchor_only(store: Store) -> None:
    own = _note(store, store.agent, f"agent:{store.agent.id}")
    assert own.outcome == "accepted" and own.state == "case"
    other = _note(store, store.outsider, f"agent:{store.agent.id}")
    assert (other.outcome, other.code) == ("rejected", "axis_not_writable")
    assert other.error.detail["anchor"] == f"agent:{store.agent.id}"
    # the operator may write to any anchor (write_any_axis)
    assert _note(store, ADMIN, f"agent:{store.agent.id}", object="x").outcome == "accepted"


# --- the state gate --------------------------------------------------------------------


def test_an_agents_lesson_is_its_own_and_a_case_item_to_everyone_else(setup: Store) -> None:
    lesson = _write(setup, scope=f"agent:{setup.agent.id}")
    mine = _ask(setup, setup.agent, T0 + US, subjects=["payment-api"])
    assert ids(mine) == [lesson]
    other = claims.Actor("agent-y", "agent", frozenset({"incidents"}))
    theirs = _ask(setup, other, T0 + US, subjects=["payment-api"])
    assert ids(theirs) == [] and withheld(theirs) == {lesson: "activated_version"}
    assert {w.item.id: w.state for w in theirs.withheld} == {lesson: "case"}
    # through the lifecycle, like a case item: promoted, it reaches the other agent
    _activate(setup, lesson)
    assert ids(_ask(setup, other, T0 + US, subjects=["payment-api"])) == [lesson]


def test_an_agents_lesson_in_shadow_stays_its_own(setup: Store) -> None:
    """An SME started its promotion (``shadow``): its own agent still recalls it (recall,
    as-of, the guard, record_use, the diff agree); everyone else sees a shadow item,
    withheld, and its owner's recalls are no shadow-log entries."""
    lesson = _write(setup, scope=f"agent:{setup.agent.id}")
    at = T0 + timedelta(minutes=10)
    with setup.sessions.begin() as s:
        lifecycle.promote(
            session=s, tenant=setup.tenant, item_id=lesson, to="shadow", actor=setup.sme, now=at
        )
    later = at + US
    mine = _ask(setup, setup.agent, later, subjects=["payment-api"])
    assert ids(mine) == [lesson]
    past = _ask(setup, setup.agent, later, subjects=["payment-api"], as_of=later)
    assert ids(past) == [lesson]
    assert _guard(setup, setup.agent, lesson, later, None).usable == (lesson,)
    other = claims.Actor("agent-y", "agent", frozenset({"incidents"}))
    theirs = _ask(setup, other, later, subjects=["payment-api"])
    assert ids(theirs) == [] and {w.item.id: w.state for w in theirs.withheld} == {lesson: "shadow"}
    assert _guard(setup, other, lesson, later, None).dropped == {lesson: "shadow"}
    # recallable to its agent throughout: no change in its diff; the other's never had it
    with setup.sessions.begin() as s:
        for who, expected in ((setup.agent, ()), (other, ())):
            d = recall.diff(
                session=s, tenant=setup.tenant, actor=who, from_=T0 + US, to=later, now=later
            )
            assert tuple(e.item_id for e in d.entries) == expected, who.id
    # used in a case by its own agent: in the context, not a shadow candidate
    req = recall.RecallRequest(query="hypothesis", subjects=["payment-api"], case_id="INC-1")
    with setup.sessions.begin() as s:
        used = recall.record_use(
            session=s, tenant=setup.tenant, actor=setup.agent, request=req, used=[lesson], now=later
        )
        logged = s.execute(
            sa.text("SELECT count(*) FROM shadow_log WHERE tenant_id = :t AND item_id = :i"),
            {"t": setup.tenant, "i": lesson},
        ).scalar_one()
    assert used.used == (lesson,) and logged == 0
    # another agent's recall in a case is the tenant-wide shadow evaluation it always was
    with setup.sessions.begin() as s:
        recall.record_use(
            session=s, tenant=setup.tenant, actor=other, request=req, used=[], now=later
        )
        logged = s.execute(
            sa.text("SELECT count(*) FROM shadow_log WHERE tenant_id = :t AND item_id = :i"),
            {"t": setup.tenant, "i": lesson},
        ).scalar_one()
    assert logged == 1


def test_an_agents_lessons_are_promotion_candidates(setup: Store) -> None:
    """A lesson counts as a scope of its own among promotion candidates, as a case does."""
    lesson = _write(setup, scope=f"agent:{setup.agent.id}")
    in_case = _write(setup)
    with setup.sessions.begin() as s:
        keys = lifecycle.candidates(session=s, tenant=setup.tenant, actor=setup.sme, min_subjects=2)
    [key] = [k for k in keys if {i.id for i in k.items} == {lesson, in_case}]
    assert key.cases == ("INC-1", f"agent:{setup.agent.id}")


def test_working_memory_is_no_promotion_candidate(setup: Store) -> None:
    """Private to its session: an SME never sees it among the keys to promote."""
    _write(setup, scope="session:run-1")
    in_case = _write(setup)
    with setup.sessions.begin() as s:
        keys = lifecycle.candidates(session=s, tenant=setup.tenant, actor=setup.sme, min_subjects=1)
    assert [[i.id for i in k.items] for k in keys] == [[in_case]]


def test_working_memory_is_its_sessions_and_its_owners_alone(setup: Store) -> None:
    note = _note(setup, setup.agent, "session:run-1").item_id
    at = T0 + timedelta(minutes=5)
    assert ids(_ask(setup, setup.agent, at, session="run-1")) == [note]
    assert _guard(setup, setup.agent, note, at, "run-1").usable == (note,)
    assert _use(setup, setup.agent, note, at, "run-1").used == (note,)
    # the owner elsewhere: withheld like another case's item
    elsewhere = _ask(setup, setup.agent, at, session="run-2")
    assert ids(elsewhere) == [] and withheld(elsewhere) == {note: "activated_version"}
    assert _guard(setup, setup.agent, note, at, None).dropped == {note: "case"}
    assert _use(setup, setup.agent, note, at, None).refused == {note: "activated_version"}
    # another principal naming the very session hears nothing of it
    other = claims.Actor("agent-y", "agent", frozenset({"incidents"}))
    theirs = _ask(setup, other, at, session="run-1")
    assert ids(theirs) == [] and theirs.withheld == ()
    assert _guard(setup, other, note, at, "run-1").dropped == {note: "not_found"}
    assert _use(setup, other, note, at, "run-1").refused == {note: "not_found"}
    with setup.sessions.begin() as s, pytest.raises(NotFound):
        claims.get_item(session=s, tenant=setup.tenant, item_id=note, actor=other)


def test_the_ttl_runs_out_exactly_at_the_last_write_plus_ttl(setup: Store) -> None:
    note = _note(setup, setup.agent, "session:run-1").item_id
    assert ids(_ask(setup, setup.agent, T0 + TTL - US, session="run-1")) == [note]
    assert _guard(setup, setup.agent, note, T0 + TTL - US, "run-1").usable == (note,)
    gone = _ask(setup, setup.agent, T0 + TTL, session="run-1")
    assert ids(gone) == [] and withheld(gone) == {note: "activated_version"}
    assert _guard(setup, setup.agent, note, T0 + TTL, "run-1").dropped == {note: "case"}
    assert _use(setup, setup.agent, note, T0 + TTL, "run-1").refused == {note: "activated_version"}
    # as of an instant, by the TTL then
    assert ids(_ask(setup, setup.agent, T0 + 2 * TTL, session="run-1", as_of=T0 + TTL - US)) == [
        note
    ]
    assert ids(_ask(setup, setup.agent, T0 + 2 * TTL, session="run-1", as_of=T0 + TTL)) == []


def test_a_write_by_key_refreshes_the_ttl(setup: Store) -> None:
    first = _note(setup, setup.agent, "session:run-1").item_id
    later = T0 + timedelta(minutes=40)
    second = _note(setup, setup.agent, "session:run-1", later, object="connection leak")
    assert second.superseded == first
    assert ids(_ask(setup, setup.agent, T0 + TTL + US, session="run-1")) == [second.item_id]
    assert ids(_ask(setup, setup.agent, later + TTL, session="run-1")) == []


def test_an_identical_rewrite_is_a_duplicate_and_keeps_the_ttl(setup: Store) -> None:
    """The TTL runs from the item's own write (its row's ``recorded_at``): writing the very
    same item again is a ``duplicate`` (no new row), so it does not restart the TTL; a
    changed value (a new row by key) does (docs/agents.md, "Private memory")."""
    first = _note(setup, setup.agent, "session:run-1")
    later = T0 + timedelta(minutes=40)
    again = _note(setup, setup.agent, "session:run-1", later)
    assert (again.outcome, again.item_id) == ("duplicate", first.item_id)
    gone = _ask(setup, setup.agent, T0 + TTL, session="run-1")
    assert ids(gone) == [] and withheld(gone) == {first.item_id: "activated_version"}
    assert _guard(setup, setup.agent, first.item_id, T0 + TTL, "run-1").dropped == {
        first.item_id: "case"
    }


def test_the_sweep_archives_expired_working_memory_once_audited(setup: Store) -> None:
    note = _note(setup, setup.agent, "session:run-1").item_id
    lesson = _note(setup, setup.agent, f"agent:{setup.agent.id}").item_id
    with setup.sessions.begin() as s:
        early = lifecycle.sweep(session=s, tenant=setup.tenant, now=T0 + TTL - US)
    assert early.working_memory == ()
    with setup.sessions.begin() as s:
        done = lifecycle.sweep(session=s, tenant=setup.tenant, now=T0 + TTL)
        again = lifecycle.sweep(session=s, tenant=setup.tenant, now=T0 + 2 * TTL)
        rows = s.execute(
            sa.text(
                "SELECT item_id, code, actor, detail FROM audit_log WHERE tenant_id = :t "
                "AND action = 'transition' AND item_id = :i AND code = 'archived'"
            ),
            {"t": setup.tenant, "i": note},
        ).all()
        states = claims.get_items(session=s, tenant=setup.tenant, ids=[note, lesson])
    assert done.working_memory == (note,) and again.working_memory == ()
    assert states[note].state == "archived" and states[lesson].state == "case"
    [row] = rows
    assert (row.code, row.actor) == ("archived", lifecycle.SYSTEM_ACTOR)
    assert row.detail["reason"] == "working_memory_ttl" and row.detail["from"] == "case"
    # archived, it is withheld by its state now, as it was read at once before
    res = _ask(setup, setup.agent, T0 + TTL, session="run-1")
    assert {w.item.id: w.state for w in res.withheld} == {note: "archived"}


# --- one rule: the SQL fragment and its Python twin --------------------------------------


def test_the_sql_rule_and_its_python_twin_agree(store: Store) -> None:
    """Over every combination of anchor, ids, owner and instant (before, exactly at and
    after the TTL), in both parameter spellings (as-of ``:x``, live ``%(x)s``)."""
    with store.sessions.begin() as s:
        cq.claim_sessions(session=s, tenant=store.tenant, ids=["S-me"], principal="me", at=T0)
        cq.claim_sessions(session=s, tenant=store.tenant, ids=["S-it"], principal="it", at=T0)
        grid = list(
            itertools.product(
                ["case", "agent", "session", "service"],
                ["INC-1", "me", "S-me", "S-it", "S-none"],
                [None, "INC-1"],
                ["me", "it"],
                [None, "S-me", "S-it", "S-none"],
                [TTL - US, TTL, TTL + US],
                ["case", "shadow", "active"],
            )
        )
        owners = {"S-me": "me", "S-it": "it"}
        for style in (":", "%"):
            at = ":at" if style == ":" else "%(at)s"
            p = (lambda n: f":{n}") if style == ":" else (lambda n: f"%({n})s")
            state_sql = f"CAST({p('state')} AS text)"
            sql = (
                f"SELECT {rq.admits_private('i', state=state_sql, at=at, style=style)} "
                "FROM (SELECT "
                f"CAST({p('tenant')} AS text) AS tenant_id, CAST({p('axis')} AS text) AS "
                f"scope_axis, CAST({p('sid')} AS text) AS scope_id, "
                f"CAST({p('rec')} AS timestamptz) AS recorded_at) i"
            )
            for axis, sid, case_id, principal, session, age, state in grid:
                params = {
                    "state": state,
                    "tenant": store.tenant,
                    "axis": axis,
                    "sid": sid,
                    "rec": T0,
                    "case_id": case_id,
                    "principal": principal,
                    "session": session,
                    "wm_ttl_s": TTL.total_seconds(),
                    "at": T0 + age,
                }
                if style == ":":
                    got = s.execute(sa.text(sql), params).scalar_one()
                else:
                    raw = s.connection().connection.driver_connection
                    row = raw.execute(sql, params).fetchone()  # type: ignore[union-attr]
                    got = row[0]
                twin = admits_private(
                    state=state,
                    scope_axis=axis,
                    scope_id=sid,
                    recorded_at=T0,
                    case_id=case_id,
                    principal=principal,
                    session=session,
                    session_owner=owners.get(sid) if axis == "session" else None,
                    at=T0 + age,
                    ttl=TTL,
                )
                assert got is twin, (style, axis, sid, case_id, principal, session, age, state)
        s.rollback()


def test_another_principals_working_memory_is_not_in_its_audit_log_nor_rolled_up(
    setup: Store,
) -> None:
    """An SME reads the audit log of what it may read: not another's working memory;
    and a rollup never gathers working memory (private to its session)."""
    notes = [
        _note(setup, setup.agent, "session:run-1", attribute=f"hypothesis_{n}").item_id
        for n in range(3)
    ]
    with setup.sessions.begin() as s:
        sme_rows = claims.audit_entries(session=s, tenant=setup.tenant, reader=setup.sme)
        own_rows = claims.audit_entries(session=s, tenant=setup.tenant, reader=setup.agent)
    assert not {e.item_id for e in sme_rows} & set(notes)
    assert set(notes) <= {e.item_id for e in own_rows}
    with setup.sessions.begin() as s:
        plans = lifecycle.plan_rollup(session=s, tenant=setup.tenant, actor=setup.agent)
    assert plans == []
