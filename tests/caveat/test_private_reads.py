"""Another principal's working memory stays unknown beyond recall (docs/agents.md,
"Private memory"; one rule, ``claims.private_visible``): not in an SME's lineage, the
re-opened queue, the citations (a case's, those awaiting an outcome), a revocation's
re-opened descendants, or a close's signals. An agent's lesson (``agent:<id>``) is not
hidden: it goes through the lifecycle like a case item. The owner and the admin see
both. As the application role under row-level security."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

import claims
import factgen
import lifecycle
import recall
from caveat import app as use
from caveat import db
from caveat.app import views
from claims import _queries as cq
from predicates.errors import NotFound
from tests.caveat._doors import world
from tests.conftest import ADMIN, T0

AGENT = claims.Actor("agent-ir", "agent")
OTHER = claims.Actor("agent-ops", "agent")
SME = claims.Actor("sme-alice", "sme")


@pytest.fixture
def rt(db_url: str) -> Iterator[use.Runtime]:
    engine = db.make_app_engine(db_url)
    runtime = use.Runtime.over(engine, "acme")
    try:
        world(runtime)
        world(runtime.for_tenant("globex"))
        for who in (AGENT, OTHER, SME):
            use.register_principal(runtime, ADMIN, who.id, role=who.role)
        use.open_case(runtime, ADMIN, "INC-1", subjects=["payment-api"], now=T0)
        yield runtime
    finally:
        engine.dispose()


def _write(rt: use.Runtime, actor: claims.Actor, scope: str, attribute: str, **kw: Any) -> int:
    body = {
        "kind": "fact",
        "subject": "payment_api",
        "attribute": attribute,
        "object": "20",
        "required": ["config.connection_pool.max eq 20"],
        "evidence": ["E-1"],
        "scope": scope,
        "content_type": "configuration",
        "text": f"{attribute} holds",
        **kw,
    }
    written = use.write(rt, actor, claims.ItemWrite.model_validate(body), now=T0)
    assert written.outcome == "accepted", written
    assert written.item_id is not None
    return written.item_id


@pytest.fixture
def items(rt: use.Runtime) -> dict[str, int]:
    """An active precedent; derived from it, the agent's working memory (``session``) and
    its lesson (``agent``), both cited in INC-1."""
    use.observe(
        rt,
        ADMIN,
        [factgen.Observation("payment-api", "config.connection_pool.max", 20)],
        at=T0,
        now=T0,
    )
    root = _write(rt, ADMIN, "case:INC-1", "pool_root")
    use.promote(rt, ADMIN, root, to="shadow", now=T0)
    use.promote(rt, ADMIN, root, to="active", now=T0)
    note = _write(rt, AGENT, "session:run-1", "pool_note", derived_from=[root])
    lesson = _write(rt, AGENT, "agent:agent-ir", "pool_lesson", derived_from=[root])
    # both enter INC-1's context through a recall in the session, then are cited
    request = recall.RecallRequest(
        query="pool_note pool_lesson holds", case_id="INC-1", session="run-1"
    )
    returned = {r.item.id for r in use.recall_items(rt, AGENT, request, now=T0).items}
    assert {note, lesson} <= returned
    use.record_use(rt, AGENT, request, [note, lesson], now=T0)
    for i in (note, lesson):
        use.cite(rt, AGENT, "INC-1", i, influence="decisive", now=T0)
    return {"root": root, "note": note, "lesson": lesson}


def _descendants(rt: use.Runtime, actor: claims.Actor, item: int) -> set[int]:
    return {n.id for n in use.lineage(rt, actor, item).descendants}


def _cited(rt: use.Runtime, actor: claims.Actor) -> set[int]:
    listing = use.list_citations(rt, actor, lifecycle.CitationFilter(case_id="INC-1"))
    return {c.item_id for c in listing.items}


def test_lineage_and_citations_never_name_anothers_working_memory(
    rt: use.Runtime, items: dict[str, int]
) -> None:
    root, note, lesson = items["root"], items["note"], items["lesson"]
    # the SME (and another agent): the lesson, never the working memory
    for reader in (SME, OTHER):
        assert _descendants(rt, reader, root) == {lesson}, reader.id
        assert _cited(rt, reader) == {lesson}, reader.id
        with pytest.raises(NotFound):
            use.lineage(rt, reader, note)
    shown = use.lineage(rt, SME, root).graph
    assert note not in shown.nodes and lesson in shown.nodes
    # its owner and the operator: both
    for reader in (AGENT, ADMIN):
        assert _descendants(rt, reader, root) == {note, lesson}, reader.id
        assert _cited(rt, reader) == {note, lesson}, reader.id
    # a page filtered by the item: not_found for the SME, as the item door says
    with pytest.raises(NotFound):
        use.list_citations(rt, SME, lifecycle.CitationFilter(item_id=note))


def test_a_revocation_and_the_reopened_queue_never_name_anothers_working_memory(
    rt: use.Runtime, items: dict[str, int]
) -> None:
    root, note, lesson = items["root"], items["note"], items["lesson"]
    revoked = use.revoke(rt, SME, root, reason="the restart was a coincidence", now=T0)
    assert set(revoked.reopened) == {lesson}
    # both were re-opened all the same
    assert {use.item(rt, ADMIN, i).state for i in (note, lesson)} == {"needs_reverification"}
    queued = {r.item_id for r in use.review_queue(rt, SME, now=T0).reopened}
    assert lesson in queued and note not in queued
    assert note in {r.item_id for r in use.review_queue(rt, ADMIN, now=T0).reopened}
    assert note in {r.item_id for r in use.review_queue(rt, AGENT, now=T0).reopened}


@pytest.mark.parametrize("who", [SME, ADMIN], ids=["sme", "admin"])
def test_a_close_names_anothers_working_memory_to_nobody_but_the_admin(
    rt: use.Runtime, items: dict[str, int], who: claims.Actor
) -> None:
    """Its signals and confidence moves (``close_as_seen``); an event never
    reaches working memory at all (it re-opens active items only, and working memory is
    never promoted)."""
    note, lesson = items["note"], items["lesson"]
    res = use.close_case(rt, who, "INC-1", outcome="rejected", now=T0)
    closed = views.closed_view(res)
    for key, named in (
        ("signals", {int(i) for i in closed["signals"]}),
        ("confidence", {int(i) for i in closed["confidence"]}),
    ):
        assert lesson in named and (note in named) is (who is ADMIN), key


def test_the_cases_cited_items_name_no_working_memory_of_another(
    rt: use.Runtime, items: dict[str, int]
) -> None:
    """What the queue of cases awaiting an outcome cites (``lifecycle.awaiting_outcome``)
    is read by the same rule."""
    from lifecycle import _queries as lq

    for reader, seen in ((SME, {items["lesson"]}), (ADMIN, {items["lesson"], items["note"]})):
        with rt.transaction() as s:
            rows = lq.cited_items(
                session=s, tenant=rt.tenant, case_ids=["INC-1"], gate=reader.gate_params()
            )
        assert {int(r.item_id) for r in rows} == seen, reader.id


# --- one rule: the SQL spelling and its Python twin -------------------------------------


def test_the_private_rule_in_sql_and_its_python_twin_agree(db_url: str) -> None:
    """Over every axis, owner and reader (agent, SME, admin), in both parameter styles."""
    engine = db.make_app_engine(db_url)
    runtime = use.Runtime.over(engine, "acme")
    try:
        with runtime.transaction() as s:
            cq.claim_sessions(session=s, tenant="acme", ids=["S-me"], principal="me", at=T0)
            owners = {"S-me": "me"}
            readers = [
                claims.Actor("me", "agent"),
                claims.Actor("it", "agent"),
                claims.Actor("sme", "sme"),
                claims.Actor("root", "admin"),
            ]
            for style in (":", "%"):

                def p(n: str, style: str = style) -> str:
                    return f":{n}" if style == ":" else f"%({n})s"

                sql = (
                    f"SELECT {cq.private_visible('i', style=style)} FROM (SELECT "
                    f"CAST({p('tenant')} AS text) AS tenant_id, CAST({p('axis')} AS text) "
                    f"AS scope_axis, CAST({p('sid')} AS text) AS scope_id) i"
                )
                for axis in ("case", "agent", "session", "tenant"):
                    for sid in ("S-me", "S-none", "me"):
                        for reader in readers:
                            params = {
                                "tenant": "acme",
                                "axis": axis,
                                "sid": sid,
                                **reader.gate_params(),
                            }
                            if style == ":":
                                got = s.execute(sa.text(sql), params).scalar_one()
                            else:
                                raw = s.connection().connection.driver_connection
                                got = raw.execute(sql, params).fetchone()[0]  # type: ignore[union-attr]
                            twin = claims.private_visible(reader, axis, owners.get(sid))
                            assert got is twin, (style, axis, sid, reader.id)
            s.rollback()
    finally:
        engine.dispose()
