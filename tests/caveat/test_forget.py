"""``forget`` is real erasure (model §7): after it, no row of any table and no page of
the table files holds the erased text, the chain verifies, every read answers as if the
items had never been written, and the context guard drops them like revoked ones.
``redact`` keeps its meaning: hidden, bytes kept.

Everything runs through the application layer as the application role (``caveat_app``)
under row-level security; the scans of rows and files run as the owner (the embedded
server's superuser), which is what reads the files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

import claims
import factgen
import recall
from caveat import app as use
from caveat import db
from predicates.errors import Forbidden, GateRejection, InputError, NotFound
from tests.caveat._doors import PRECEDENT, precedent, world
from tests.caveat.test_cli_incident import world as cli_world  # noqa: F401 (a fixture)
from tests.conftest import ADMIN

SECRET = "zq-leaked-token-8841-Kx7"
TEXT = f"Payment API pool exhausted; the on-call pasted {SECRET} into the channel."
OBJECT = f"restart with token {SECRET}"
KEPT = "orders db stayed healthy throughout"  # the kept item's citation's rationale
SME = claims.Actor("sme-alice", "sme")
AGENT = claims.Actor("agent-ir", "agent")


@dataclass
class World:
    rt: use.Runtime
    owner: sa.Engine
    old: int  # the version ``item`` superseded (the same key)
    item: int  # the current, active version
    other: int  # an item about another subject, never forgotten
    before: datetime  # an instant before anything was written
    written: datetime  # an instant when the item was active


@pytest.fixture
def w(db_url: str) -> Iterator[World]:
    owner = db.make_engine(db_url)
    engine = db.make_app_engine(db_url)
    rt = use.Runtime.over(engine, "acme")
    try:
        before = datetime.now(UTC)
        world(rt)
        use.import_entities(rt, ADMIN, [factgen.EntitySpec("orders-db", "database", ())])
        use.observe(
            rt, ADMIN, [factgen.Observation("payment-api", "config.connection_pool.max", 20)]
        )
        old = precedent(rt)  # active, pool max 20, a text without the secret
        secret = {**PRECEDENT, "text": TEXT, "object": OBJECT}
        item = use.write(rt, ADMIN, claims.ItemWrite.model_validate(secret)).item_id
        use.promote(rt, ADMIN, item, to="shadow")
        use.promote(rt, ADMIN, item, to="active")
        other = use.write(
            rt,
            ADMIN,
            claims.ItemWrite.model_validate(
                {**PRECEDENT, "subject": "orders-db", "required": [], "text": "orders db is fine"}
            ),
        ).item_id
        with pytest.raises(GateRejection):  # a refused write that quotes the text
            use.write(rt, ADMIN, claims.ItemWrite.model_validate({**secret, "evidence": []}))
        rt.embed_pending()
        use.cite(
            rt, ADMIN, "INC-1", other, influence="considered", rationale=KEPT
        )  # first: below it in the page
        use.cite(  # a citation's free text quotes the secret
            rt,
            ADMIN,
            "INC-1",
            item,
            influence="considered",
            rationale=f"we followed it: {OBJECT}",
            expected=f"pool refilled after {SECRET}",
            observed=f"saw {SECRET} rotate",
        )
        written = datetime.now(UTC)
        yield World(rt, owner, old, item, other, before, written)
    finally:
        engine.dispose()
        owner.dispose()


def _rows_holding(owner: sa.Engine, needle: str) -> dict[str, int]:
    """Rows of every table of the schema whose text holds ``needle``, as the owner."""
    found = {}
    with owner.connect() as c:
        tables = c.execute(
            sa.text(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY 1"
            )
        ).scalars()
        for t in list(tables):
            n = c.execute(
                sa.text(f'SELECT count(*) FROM "{t}" x WHERE CAST(x AS text) LIKE :p'),
                {"p": f"%{needle}%"},
            ).scalar_one()
            if n:
                found[t] = int(n)
    return found


def _pages_holding(owner: sa.Engine, needle: str) -> list[str]:
    """Relations of the schema (tables, their TOAST, every index) one of whose files
    holds ``needle``'s bytes, after a CHECKPOINT wrote every page out; read with
    ``pg_read_binary_file`` (the embedded server's superuser)."""
    found = []
    with owner.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(sa.text("CHECKPOINT"))
        rels = c.execute(
            sa.text(
                "SELECT c.oid::regclass::text, pg_relation_filepath(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE (n.nspname = 'public' OR c.oid IN (SELECT reltoastrelid FROM pg_class t "
                "  JOIN pg_namespace tn ON tn.oid = t.relnamespace WHERE tn.nspname = 'public') "
                "  OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN (SELECT "
                "  reltoastrelid FROM pg_class t JOIN pg_namespace tn ON tn.oid = t.relnamespace "
                "  WHERE tn.nspname = 'public'))) "
                "AND c.relkind IN ('r', 't', 'i', 'm') AND pg_relation_filepath(c.oid) IS NOT NULL"
            )
        ).all()
        for name, path in rels:
            segment, n = path, 0
            while True:
                data = c.execute(
                    sa.text("SELECT pg_read_binary_file(:p, true)"), {"p": segment}
                ).scalar()
                if data is None:
                    break
                if needle.encode() in bytes(data):
                    found.append(name)
                n += 1
                segment = f"{path}.{n}"
    return found


def _query() -> recall.RecallRequest:
    return recall.RecallRequest(
        "payment api pool exhausted restart token", subjects=["payment-api"], explain=True
    )


def test_forget_removes_the_bytes_and_the_chain_still_verifies(w: World) -> None:
    assert _rows_holding(w.owner, SECRET)  # the control: the text is stored
    assert _pages_holding(w.owner, SECRET)
    done = use.forget(w.rt, ADMIN, items=[w.item], reason="a leaked secret")
    assert done.erasure.items == (w.old, w.item)  # the version it superseded goes too
    # the application role may not rewrite the catalog: it says so (see the owner's test)
    assert done.not_vacuumed == ("pg_statistic",) and "items" in done.vacuumed
    assert {"citations", "case_context", "evidence_links"} <= set(done.vacuumed)
    assert _rows_holding(w.owner, SECRET) == {}
    assert _pages_holding(w.owner, SECRET) == []
    # the kept item's citation stays: the table was rewritten, not emptied
    assert _rows_holding(w.owner, KEPT) == {"citations": 1, "audit_log": 1}
    assert "citations" in _pages_holding(w.owner, KEPT)
    report = use.audit_verify(w.rt, ADMIN)
    assert report.ok and report.erased == len(done.erasure.audit_rows) >= 4
    # the erasure record keeps ids and the reason, the audit row names the erased rows
    [row] = use.audit_entries(w.rt, ADMIN, action="forget")
    assert row.detail["items"] == [w.old, w.item] and row.detail["reason"] == "a leaked secret"
    assert row.detail["audit_rows"] == list(done.erasure.audit_rows)


def test_a_forgotten_item_reads_as_never_written(w: World) -> None:
    seen = use.recall_items(w.rt, AGENT, _query())
    assert w.item in [r.item.id for r in seen.items]
    changed = use.diff(w.rt, SME, from_=w.before, to=datetime.now(UTC))
    assert w.item in [e.item_id for e in changed.entries]  # the control
    use.forget(w.rt, ADMIN, items=[w.item], reason="a leaked secret")
    now, asof = (
        use.recall_items(w.rt, AGENT, _query()),
        recall.RecallRequest(
            "payment api pool exhausted restart token",
            subjects=["payment-api"],
            explain=True,
            as_of=w.written,
        ),
    )
    for res in (now, use.recall_items(w.rt, AGENT, asof)):
        assert w.item not in [r.item.id for r in res.items]
        assert w.item not in [x.item_id for x in res.withheld]
    for reader in (ADMIN, SME, AGENT):
        with pytest.raises(NotFound):
            use.item(w.rt, reader, w.item)
    with pytest.raises(NotFound):
        use.lineage(w.rt, ADMIN, w.item)
    changed = use.diff(w.rt, SME, from_=w.before, to=datetime.now(UTC))
    assert w.item not in [e.item_id for e in changed.entries]
    assert all(e.item_id != w.item for e in use.audit_entries(w.rt, SME))
    with pytest.raises(GateRejection) as err:  # nothing new is built on it
        use.write(
            w.rt,
            ADMIN,
            claims.ItemWrite.model_validate(
                {**PRECEDENT, "derived_from": [w.item], "text": "built on it"}
            ),
        )
    assert err.value.code == "not_found"


def test_the_context_guard_drops_a_forgotten_item_like_a_revoked_one(w: World) -> None:
    assert use.check_context(w.rt, AGENT, [w.item, w.other]).usable == (w.item,)
    use.forget(w.rt, ADMIN, items=[w.item], reason="a leaked secret")
    answer = use.check_context(w.rt, AGENT, [w.item, w.old, 999_999], record=True)
    assert answer.dropped == {w.item: "revoked", w.old: "revoked", 999_999: "not_found"}
    assert use.audit_verify(w.rt, ADMIN).ok


def test_forget_takes_the_history_of_an_item_with_it(w: World) -> None:
    """Forgetting the current version of a key takes the versions it superseded."""
    again = use.write(
        w.rt, ADMIN, claims.ItemWrite.model_validate({**PRECEDENT, "text": "a third version"})
    ).item_id
    plan = use.forget_preview(w.rt, ADMIN, items=[again])
    assert set(plan.items) == {again, w.item, w.old}  # its predecessors carry the secret
    use.forget(w.rt, ADMIN, items=[again], reason="the whole key")
    assert _rows_holding(w.owner, SECRET) == {}
    assert use.audit_verify(w.rt, ADMIN).ok


def test_the_preview_counts_what_would_go_and_changes_nothing(w: World) -> None:
    plan = use.forget_preview(w.rt, ADMIN, subject="payment_api")  # an alias resolves
    assert plan.target == "payment-api"
    assert set(plan.items) == {w.old, w.item}
    assert plan.by_subject == {"payment-api": 2}
    assert plan.by_anchor == {"case:INC-1": 2}
    assert len(plan.audit_rows) > 4
    anchor = use.forget_preview(w.rt, ADMIN, anchor="case:INC-1")
    assert set(anchor.items) == {w.old, w.item, w.other}
    assert _rows_holding(w.owner, SECRET)  # nothing changed
    assert use.audit_verify(w.rt, ADMIN).erased == 0


def test_forget_a_subject_keeps_its_name_only_as_a_digest(w: World) -> None:
    done = use.forget(w.rt, ADMIN, subject="payment-api", reason="gdpr")
    assert set(done.erasure.items) == {w.old, w.item}
    with w.owner.connect() as c:
        target = c.execute(sa.text("SELECT target_id FROM erasures")).scalar_one()
    assert target.startswith("sha256:") and "payment" not in target
    assert _rows_holding(w.owner, SECRET) == {}
    res = use.recall_items(w.rt, AGENT, _query())
    assert [r.item.id for r in res.items] == []
    assert use.audit_verify(w.rt, ADMIN).ok


def test_forget_is_the_admins_and_takes_exactly_one_target(w: World) -> None:
    for actor in (SME, AGENT):
        with pytest.raises(Forbidden):
            use.forget(w.rt, actor, items=[w.item], reason="x")
        with pytest.raises(Forbidden):
            use.forget_preview(w.rt, actor, items=[w.item])
    with pytest.raises(InputError, match="exactly one"):
        use.forget(w.rt, ADMIN, items=[w.item], subject="payment-api", reason="x")
    with pytest.raises(InputError, match="exactly one"):
        use.forget_preview(w.rt, ADMIN)
    with pytest.raises(InputError, match="reason"):
        use.forget(w.rt, ADMIN, items=[w.item], reason="  ")
    with pytest.raises(InputError, match="anchor"):
        use.forget_preview(w.rt, ADMIN, anchor="no-colon")
    with pytest.raises(NotFound):
        use.forget(w.rt, ADMIN, items=[999_999], reason="x")
    assert _rows_holding(w.owner, SECRET)  # nothing was erased by a refusal
    assert use.audit_verify(w.rt, ADMIN).erased == 0


def test_redact_keeps_the_bytes(w: World) -> None:
    use.redact(w.rt, ADMIN, w.item, reason="hide it")
    with pytest.raises(NotFound):
        use.item(w.rt, SME, w.item)
    assert _rows_holding(w.owner, SECRET)["items"] >= 1  # hidden, not erased
    assert use.audit_verify(w.rt, ADMIN).erased == 0


def test_a_detail_erased_outside_an_erasure_breaks_the_chain(w: World) -> None:
    """The owner may set a detail to NULL (the trigger lets it through, as the erasure
    does), but the verifier finds a row no ``forget`` row names."""
    with w.owner.begin() as c:
        seq = c.execute(
            sa.text("SELECT min(seq) FROM audit_log WHERE tenant_id = 'acme' AND item_id = :i"),
            {"i": w.item},
        ).scalar_one()
        c.execute(
            sa.text("UPDATE audit_log SET detail = NULL WHERE tenant_id = 'acme' AND seq = :s"),
            {"s": seq},
        )
    report = use.audit_verify(w.rt, ADMIN)
    assert not report.ok and report.broken_at == seq
    assert report.reason == "row detail erased outside any erasure"


def test_a_rewritten_detail_no_longer_matches_its_digest(w: World) -> None:
    with w.owner.begin() as c:
        c.execute(sa.text("ALTER TABLE audit_log DISABLE TRIGGER USER"))
        c.execute(
            sa.text(
                "UPDATE audit_log SET detail = jsonb_set(detail, '{reason}', '\"fine\"') "
                "WHERE tenant_id = 'acme' AND seq = 3"
            )
        )
        c.execute(sa.text("ALTER TABLE audit_log ENABLE TRIGGER USER"))
    report = use.audit_verify(w.rt, ADMIN)
    assert not report.ok and report.broken_at == 3
    assert report.reason == "row detail does not match its digest"


def test_forget_takes_the_proposal_an_item_came_from(w: World) -> None:
    """A model's proposal is audited before the write (``proposed``, about no item): the
    item's accepted row links to it (and it quotes the text), so its detail goes too."""
    done = use.propose(
        w.rt,
        AGENT,
        [
            {
                "kind": "episode",
                "subject": "payment-api",
                "attribute": "pasted_a_token",
                "object": "E-1",
                "required": ["config.connection_pool.max eq 20"],
                "evidence": ["E-1"],
                "text": f"pasted {SECRET[::-1]} in chat",  # no other row holds this text
            }
        ],
        scope=claims.Anchor(axis="session", id="s-1"),
    )
    [outcome] = done.outcomes
    assert outcome.outcome == "accepted" and outcome.item_id is not None
    assert _rows_holding(w.owner, SECRET[::-1])
    use.forget(w.rt, ADMIN, items=[outcome.item_id], reason="a leaked secret")
    assert _rows_holding(w.owner, SECRET[::-1]) == {}
    assert use.audit_verify(w.rt, ADMIN).ok


# --- the doors: HTTP and the CLI, as the application role -----------------------------


def test_post_v1_forget_is_the_admins_with_a_preview(db_url: str) -> None:
    from tests.caveat.test_http import client, serving

    with serving(db_url) as s:
        item = precedent(s.rt)
        admin = use.create_token(s.rt, ADMIN, "ops", role="admin").token
        body = {"items": [item], "reason": "a leaked secret"}
        with client(s, s.sme) as c:
            assert c.post("/v1/forget/preview", json={"items": [item]}).status_code == 403
            refused = c.post("/v1/forget", json=body)
            assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
        with client(s, admin) as c:
            bad = c.post("/v1/forget/preview", json={"items": [item], "subject": "x"})
            assert bad.status_code == 422 and "exactly one" in bad.text
            axis = c.post("/v1/forget/preview", json={"anchor": "nosuchaxis:x"})
            assert axis.status_code == 422 and "'nosuchaxis'" in axis.json()["detail"]
            none = c.post("/v1/forget", json={"anchor": "case:INC-404", "reason": "r"})
            assert none.status_code == 404 and none.json()["code"] == "not_found"
            assert c.post("/v1/forget", json={"items": [item]}).status_code == 422  # no reason
            plan = c.post("/v1/forget/preview", json={"subject": "payment-api"}).json()
            assert plan["items"] == [item] and plan["by_anchor"] == {"case:INC-1": 1}
            done = c.post("/v1/forget", json=body)
            assert done.status_code == 200, done.text
            assert done.json()["items"] == [item]
            assert done.json()["not_vacuumed"] == ["pg_statistic"]  # the catalog's owner's
            assert done.json()["why_not_vacuumed"] == {
                "pg_statistic": "this role may not vacuum it"
            }
            assert c.get(f"/v1/items/{item}").status_code == 404
            assert c.post("/v1/audit/verify").json()["ok"] is True
        with client(s, s.agent) as c:
            checked = c.post("/v1/context/check", json={"items": [item]}).json()
            assert checked["dropped"] == {str(item): "revoked"}


def test_caveat_forget_previews_erases_and_refuses_an_sme(
    cli_world: Path,  # noqa: F811
    db_url: str,
) -> None:
    from tests.caveat.test_cli_incident import ITEM, as_json, run

    item = json.loads(json.dumps(ITEM))
    item["text"] = TEXT
    (cli_world / "item.json").write_text(json.dumps(item))
    run("case", "open", "INC-1", "--subject", "payment_api", "--as", "agent-ir")
    [out] = as_json("write", str(cli_world / "item.json"), "--as", "agent-ir")
    item_id = str(out["item_id"])
    refused = run("forget", "--item", item_id, "--reason", "x", "--as", "sme-alice", ok=1)
    assert "forbidden" in refused.output or "may not" in refused.output
    assert "two" not in run("forget", "--item", item_id, "--subject", "x", ok=2).output
    assert "--reason" in run("forget", "--item", item_id, ok=2).output
    preview = run("forget", "--anchor", "case:INC-1", "--dry-run").output
    assert "would erase 1 item rows" in preview and "anchor case:INC-1: 1" in preview
    done = as_json("forget", "--item", item_id, "--reason", "a leaked secret")
    assert done["items"] == [int(item_id)] and done["audit_rows"] >= 2
    assert "holds" in run("audit", "verify").output
    owner = db.make_engine(db_url)
    try:
        assert _rows_holding(owner, SECRET) == {}
    finally:
        owner.dispose()


def test_the_item_page_forgets_with_a_preview_for_an_admin_only(db_url: str) -> None:
    from tests.caveat.test_http import serving
    from tests.caveat.test_web import browser, csrf

    with serving(db_url) as s:
        precedent(s.rt)
        secret = claims.ItemWrite.model_validate({**PRECEDENT, "text": TEXT, "object": OBJECT})
        item = use.write(s.rt, ADMIN, secret).item_id  # supersedes the precedent
        admin = use.create_token(s.rt, ADMIN, "ops", role="admin").token
        with browser(s, s.sme) as c:
            page = c.get(f"/ui/items/{item}").text
            assert "/act/forget" not in page  # not an SME's action
            assert c.get(f"/ui/items/{item}/act/forget").status_code == 403
        with browser(s, admin) as c:
            assert f"/ui/items/{item}/act/forget" in c.get(f"/ui/items/{item}").text
            preview = c.get(f"/ui/items/{item}/act/forget").text
            assert "erased for good" in preview and "2 item row(s)" in preview
            assert use.item(s.rt, ADMIN, item).id == item  # a preview changes nothing
            r = c.post(
                f"/ui/items/{item}/act/forget",
                data={"csrf": csrf(preview), "rationale": "a leaked secret"},
            )
            assert r.status_code == 303
            assert r.headers["location"] == f"/ui/?done=forget%20%23{item}"
            assert c.get(f"/ui/items/{item}").status_code == 404
            assert SECRET not in c.get("/ui/").text
        assert use.audit_verify(s.rt, ADMIN).ok
        owner = db.make_engine(db_url)
        try:
            assert _rows_holding(owner, SECRET) == {}
        finally:
            owner.dispose()


def test_without_maintain_the_erasure_vacuums_as_the_owner_or_says_what_it_left(
    w: World, db_url: str
) -> None:
    """Where the application role may not vacuum a table (a server before PostgreSQL 17
    has no MAINTAIN), the erasure vacuums it through the store's own URL; without one, it
    is done and committed, and the answer names the table left."""
    with w.owner.begin() as c:
        c.execute(sa.text("REVOKE MAINTAIN ON items, item_usage FROM caveat_app"))
    bare = use.forget(w.rt, ADMIN, items=[w.other], reason="no owner at hand")
    assert bare.not_vacuumed == ("items", "item_usage", "pg_statistic")
    assert set(bare.why_not_vacuumed.values()) == {"this role may not vacuum it"}
    assert "audit_log" in bare.vacuumed
    with_owner = use.Runtime.over(w.rt.engine, "acme", server_url=db_url)
    done = use.forget(with_owner, ADMIN, items=[w.item], reason="a leaked secret")
    assert done.not_vacuumed == () and "items" in done.vacuumed
    assert _rows_holding(w.owner, SECRET) == {}
    assert _pages_holding(w.owner, SECRET) == []


# --- what the review found: statistics, quotes in other rows, the erase function, ------
# --- an unknown axis, a failing vacuum ------------------------------------------------


def _catalog_holds(owner: sa.Engine, needle: str) -> bool:
    """Whether ``pg_statistic``'s file holds ``needle``'s bytes (after a CHECKPOINT)."""
    with owner.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(sa.text("CHECKPOINT"))
        path = c.execute(sa.text("SELECT pg_relation_filepath('pg_statistic')")).scalar_one()
        data = c.execute(sa.text("SELECT pg_read_binary_file(:p, true)"), {"p": path}).scalar()
    return needle.encode() in bytes(data or b"")


def test_the_erasure_replaces_the_statistics_and_rewrites_pg_statistic_as_the_owner(
    w: World, db_url: str
) -> None:
    """An ``ANALYZE`` sampled the secret into ``pg_statistic``; the erasure, vacuuming
    as the owner (the embedded server's superuser), analyzes the tables anew and
    rewrites the catalog, so its file no longer holds it."""
    with w.owner.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(sa.text("ANALYZE"))
    assert _catalog_holds(w.owner, SECRET)  # the control
    with_owner = use.Runtime.over(w.rt.engine, "acme", server_url=db_url)
    done = use.forget(with_owner, ADMIN, items=[w.item], reason="a leaked secret")
    assert done.not_vacuumed == () and "pg_statistic" in done.vacuumed
    assert not _catalog_holds(w.owner, SECRET)
    assert _pages_holding(w.owner, SECRET) == []


def test_a_quote_of_the_erased_text_in_a_row_about_another_item_goes_too(w: World) -> None:
    """A citation of a kept item whose rationale quotes the forgotten item's object:
    its audit row is about the kept item, and its detail goes all the same."""
    quoted = f"unlike the advice to {OBJECT}, this one held"
    use.cite(w.rt, ADMIN, "INC-1", w.other, influence="considered", rationale=quoted)
    assert "audit_log" in _rows_holding(w.owner, quoted)  # the control
    plan = use.forget_preview(w.rt, ADMIN, items=[w.item])
    with w.owner.connect() as c:
        seq = c.execute(
            sa.text("SELECT seq FROM audit_log WHERE item_id = :i AND detail->>'rationale' = :r"),
            {"i": w.other, "r": quoted},
        ).scalar_one()
    assert seq in plan.audit_rows
    use.forget(w.rt, ADMIN, items=[w.item], reason="a leaked secret")
    # the kept item's own citation keeps its words (docs/lifecycle.md); its audit row not
    assert _rows_holding(w.owner, SECRET) == {"citations": 1}
    assert "audit_log" not in _pages_holding(w.owner, SECRET)
    assert use.audit_verify(w.rt, ADMIN).ok


def _erase_as_app(db_url: str, erasure: int | None, seqs: list[int]) -> int:
    """``caveat_erase_audit`` called as ``caveat_app`` in one transaction, rolled back;
    with ``erasure`` None, under an erasure record this transaction inserts."""
    app = db.make_app_engine(db_url)
    try:
        with app.connect() as c, c.begin() as tx:
            c.execute(sa.text("SELECT set_config('caveat.tenant', 'acme', true)"))
            if erasure is None:
                erasure = c.execute(
                    sa.text(
                        "INSERT INTO erasures (tenant_id, target_axis, target_id, at, actor, "
                        "reason, items) VALUES ('acme', 'item', '', now(), 'x', 'r', 0) "
                        "RETURNING id"
                    )
                ).scalar_one()
            try:
                return int(
                    c.execute(
                        sa.text("SELECT caveat_erase_audit(:e, CAST(:s AS bigint[]))"),
                        {"e": erasure, "s": seqs},
                    ).scalar_one()
                )
            finally:
                tx.rollback()
    finally:
        app.dispose()


def test_caveat_erase_audit_takes_only_this_transactions_erasure_and_keeps_forget_rows(
    w: World, db_url: str
) -> None:
    done = use.forget(w.rt, ADMIN, items=[w.other], reason="x")
    with w.owner.connect() as c:
        forget_seq, kept_seq = c.execute(
            sa.text(
                "SELECT max(seq) FILTER (WHERE action = 'forget'), "
                "min(seq) FILTER (WHERE action <> 'forget' AND detail IS NOT NULL) "
                "FROM audit_log WHERE tenant_id = 'acme'"
            )
        ).one()
    with pytest.raises(sa.exc.DBAPIError, match="recorded by this transaction"):
        _erase_as_app(db_url, done.erasure.id, [kept_seq])  # an old erasure's id
    assert _erase_as_app(db_url, None, [kept_seq]) == 1  # the control: this one's
    with pytest.raises(sa.exc.DBAPIError, match="forget or rechain row"):
        _erase_as_app(db_url, None, [forget_seq])
    assert use.audit_verify(w.rt, ADMIN).ok  # each was rolled back


def _relfilenode(owner: sa.Engine, table: str) -> int:
    with owner.connect() as c:
        return int(
            c.execute(
                sa.text("SELECT relfilenode FROM pg_class WHERE oid = CAST(:t AS regclass)"),
                {"t": table},
            ).scalar_one()
        )


def test_an_unknown_axis_is_refused_and_nothing_matched_is_not_found(w: World) -> None:
    for call in (use.forget_preview, use.forget):
        kwargs = {"reason": "oops"} if call is use.forget else {}
        with pytest.raises(InputError, match="'nosuchaxis'") as err:
            call(w.rt, ADMIN, anchor="nosuchaxis:x", **kwargs)
        assert err.value.detail["attribute"] == "anchor"
        with pytest.raises(InputError, match="did you mean case"):
            call(w.rt, ADMIN, anchor="cas:INC-1", **kwargs)
    assert use.forget_preview(w.rt, ADMIN, anchor="case:INC-404").items == ()
    use.forget(w.rt, ADMIN, items=[w.other], reason="the one erasure")
    rewritten = _relfilenode(w.owner, "items")
    with pytest.raises(NotFound, match="case:INC-404"):
        use.forget(w.rt, ADMIN, anchor="case:INC-404", reason="nothing there")
    with pytest.raises(NotFound, match="orders-db"):  # its one item is already forgotten
        use.forget(w.rt, ADMIN, subject="orders-db", reason="nothing left")
    assert _relfilenode(w.owner, "items") == rewritten  # no VACUUM FULL ran
    with w.owner.connect() as c:
        assert c.execute(sa.text("SELECT count(*) FROM erasures")).scalar_one() == 1
    assert len(use.audit_entries(w.rt, ADMIN, action="forget")) == 1


def test_a_vacuum_that_fails_after_the_commit_is_reported_not_raised(w: World) -> None:
    """The rewrite of ``citations`` fails (an index whose expression raises once a flag
    is set, as the owner): the erasure is committed, the answer names the table and the
    server's reason, and the other tables are vacuumed."""
    with w.owner.begin() as c:
        c.execute(sa.text("CREATE TABLE vacuum_fails (x int)"))
        c.execute(
            sa.text(
                "CREATE FUNCTION fails_when_flagged(i bigint) RETURNS bigint LANGUAGE plpgsql "
                "IMMUTABLE AS $$ BEGIN IF EXISTS (SELECT 1 FROM public.vacuum_fails) THEN "
                "RAISE EXCEPTION 'rebuild refused'; END IF; RETURN i; END $$"
            )
        )
        c.execute(sa.text("CREATE INDEX citations_fail ON citations (fails_when_flagged(item_id))"))
        c.execute(sa.text("INSERT INTO vacuum_fails VALUES (1)"))
    done = use.forget(w.rt, ADMIN, items=[w.item], reason="a leaked secret")
    assert done.not_vacuumed == ("citations", "pg_statistic")
    assert "rebuild refused" in done.why_not_vacuumed["citations"]
    assert "items" in done.vacuumed and "audit_log" in done.vacuumed
    with pytest.raises(NotFound):  # committed
        use.item(w.rt, ADMIN, w.item)
    assert _rows_holding(w.owner, SECRET) == {}
    assert use.audit_verify(w.rt, ADMIN).ok
