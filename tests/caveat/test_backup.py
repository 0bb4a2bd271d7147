"""Figure 8 of issue 14, backups: a store populated through the application layer,
``pg_dump``-ed (custom format) and ``pg_restore``-d into a fresh server of its own,
answers a fixed query set exactly as before, and every tenant's audit chain verifies.

The source is a database on the suite's shared server (nothing is killed there); the
restore target is a second embedded PostgreSQL this test starts in a temporary
directory and stops. Everything after the restore runs as ``caveat_app`` under
row-level security, which the restore had to create (a dump holds no roles).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import claims
import factgen
from caveat import app as use
from caveat import backup, db
from caveat.app import views
from predicates.errors import CaveatError, Conflict
from recall import HashingEmbedder, RecallRequest
from tests.caveat._doors import QUERY, precedent, world
from tests.caveat._review_world import Review, review_world
from tests.caveat.test_cli_incident import run
from tests.caveat.test_isolation import function_problems
from tests.conftest import ADMIN

TENANTS = ("acme", "globex")
POOL_MAX_20 = factgen.Observation("payment-api", "config.connection_pool.max", 20)
AGENT = claims.Actor("agent-ir", "agent")
AGENT_PAY = claims.Actor("agent-pay", "agent", frozenset({"payments-restricted"}))
SME = claims.Actor("sme-alice", "sme")

#: The fixed query set: (query, subjects, case) for recall, each asked with explain.
RECALLS: tuple[tuple[str, list[str] | None, str | None], ...] = (
    (QUERY, None, None),
    ("pool max too low", ["payment-api"], None),
    ("checkout latency", ["payment-api"], "INC-2"),
    ("retries amplify load", None, "INC-4"),
    ("card vault timeout", None, None),
)


@contextmanager
def runtime(url: str, tenant: str) -> Iterator[use.Runtime]:
    """A runtime logged in as caveat_app (make_app_engine refuses a role that escapes
    row-level security), with the deterministic embedder."""
    engine = db.make_app_engine(url)
    try:
        yield use.Runtime.over(engine, tenant, embedder=HashingEmbedder())
    finally:
        engine.dispose()


def populate(rt: use.Runtime) -> dict[str, Any]:
    """Two tenants through the application layer: items in several states, a revocation
    over a lineage, facts, a deploy event, refusals, tokens; embeddings drained."""
    handles: dict[str, Any] = {"tokens": {}}
    for tenant in TENANTS:
        t = rt.for_tenant(tenant)
        world(t)
        use.register_principal(t, ADMIN, "sme-alice", role="sme", capabilities=[])
        use.register_principal(t, ADMIN, "agent-ir", role="agent", capabilities=[])
        use.observe(
            t, ADMIN, [factgen.Observation("payment-api", "config.connection_pool.max", 20)]
        )
        for principal, role in (("agent-ir", "agent"), ("sme-alice", "sme")):
            issued = use.create_token(t, ADMIN, principal, role=role)
            handles["tokens"][(tenant, principal)] = issued.token
    use.record_event(rt, ADMIN, type="deploy", subjects=["payment-api"])
    review: Review = review_world(rt)
    handles["review"] = review
    time.sleep(0.01)
    handles["mid"] = use.utcnow()  # the parent is active, its revocation to come
    time.sleep(0.01)
    # revoke the active parent: its child and grandchild are re-opened
    use.revoke(rt, ADMIN, review.parent, reason="the pool max was 40, not 20")
    globex = rt.for_tenant("globex")
    use.record_event(globex, ADMIN, type="deploy", subjects=["payment-api"])
    root = precedent(globex)
    doomed = use.write(
        globex,
        ADMIN,
        claims.ItemWrite.model_validate(
            {
                "kind": "fact",
                "subject": "payment-api",
                "attribute": "pool_max_too_low",
                "object": True,
                "required": ["config.connection_pool.max eq 20"],
                "evidence": ["E-1"],
                "scope": {"axis": "case", "id": "INC-1"},
                "text": "Pool max 20 is too low.",
            }
        ),
    ).item_id
    assert doomed is not None
    use.promote(globex, ADMIN, doomed, to="shadow")
    child = use.write(
        globex,
        ADMIN,
        claims.ItemWrite.model_validate(
            {
                "kind": "fact",
                "subject": "payment-api",
                "attribute": "checkout_latency_from_pool",
                "object": True,
                "derived_from": [doomed],
                "evidence": ["E-1"],
                "scope": {"axis": "case", "id": "INC-1"},
                "text": "Checkout latency follows the pool.",
            }
        ),
    ).item_id
    use.revoke(globex, ADMIN, doomed, reason="the pool max was 40")
    handles["globex"] = (root, doomed, child)
    for tenant in TENANTS:
        rt.for_tenant(tenant).embed_pending()
    return handles


def _or_refused(render: Any, call: Any) -> Any:
    """The answer's view, or the refusal's code (a case one tenant has and another has
    not is ``not_found`` there, before the dump and after the restore alike)."""
    try:
        return render(call())
    except CaveatError as exc:
        return {"refused": exc.code}


def answers(rt: use.Runtime, *, since: datetime, mid: datetime, now: datetime) -> dict[str, Any]:
    """The fixed query set's answers in each tenant, as JSON (the doors' views)."""
    out: dict[str, Any] = {}
    for tenant in TENANTS:
        t = rt.for_tenant(tenant)
        ids = sorted({i for e in use.audit_entries(t, ADMIN) if (i := e.item_id) is not None})
        out[tenant] = {
            "recall": [
                _or_refused(
                    views.recall_view,
                    lambda actor=actor, query=query, subjects=subjects, case=case: use.recall_items(
                        t,
                        actor,
                        RecallRequest(query, subjects=subjects, case_id=case, explain=True),
                        now=now,
                    ),
                )
                for actor in (AGENT, AGENT_PAY)
                for query, subjects, case in RECALLS
            ],
            "context": [
                _or_refused(
                    views.context_view,
                    lambda actor=actor, case=case: use.check_context(
                        t, actor, ids, case_id=case, now=now
                    ),
                )
                for actor in (AGENT, AGENT_PAY)
                for case in (None, "INC-2")
            ],
            "diff": [
                views.diff_view(use.diff(t, actor, from_=start, to=end, subjects=subjects, now=now))
                for actor in (AGENT, SME)
                for subjects in (None, ["payment-api"])
                for start, end in ((since, mid), (mid, now))
            ],
            "review": [
                views.review_view(use.review_queue(t, actor, now=now)) for actor in (SME, ADMIN)
            ],
            "items": ids,
        }
    return out


def test_a_dump_restored_into_a_fresh_server_answers_as_before(db_url: str, tmp_path: Path) -> None:
    since = use.utcnow() - timedelta(seconds=1)
    with runtime(db_url, "acme") as rt:
        handles = populate(rt)
        now = use.utcnow() + timedelta(seconds=1)
        before = answers(rt, since=since, mid=handles["mid"], now=now)
        heads = {t: use.audit_verify(rt.for_tenant(t), ADMIN) for t in TENANTS}
    assert all(r.ok for r in heads.values()), heads
    acme = before["acme"]
    review = handles["review"]
    # the world is what the figure claims: items in several states, a revocation
    # with lineage, refusals, and answers that are not empty
    states = {w.get("state") for r in acme["recall"] for w in r.get("withheld", [])}
    assert {"revoked", "needs_reverification", "shadow", "case"} <= states, states
    assert any(r.get("items") for r in acme["recall"]) and any(
        r.get("items") for r in before["globex"]["recall"]
    )
    assert acme["review"][1]["refusals"] and acme["review"][1]["reopened"]
    assert any(d["became"] for d in acme["diff"]) and any(d["stopped"] for d in acme["diff"])
    assert review.hidden not in {
        i["item"]["id"] for r in acme["recall"][:5] for i in r.get("items", [])
    }

    dump = tmp_path / "caveat.dump"
    started = time.monotonic()
    size = backup.dump(db_url, dump)
    dumped = time.monotonic() - started
    assert size > 0

    with db.temporary_server() as fresh:
        started = time.monotonic()
        assert backup.restore(fresh, dump)  # a fresh server has no caveat_app: created
        restored = time.monotonic() - started
        assert not backup.ensure_app_role(fresh)
        with pytest.raises(Conflict):  # a restore never merges into what is there
            backup.restore(fresh, dump)
        assert db.at_head(fresh)
        with runtime(fresh, "acme") as rt2:
            with rt2.engine.connect() as conn:  # the reads below run as the login role
                assert conn.execute(sa.text("SELECT current_user")).scalar() == db.APP_ROLE
            for tenant in TENANTS:
                report = use.audit_verify(rt2.for_tenant(tenant), ADMIN)
                assert report.ok and report.head == heads[tenant].head, report
                assert report.checked == heads[tenant].checked
            after = answers(rt2, since=since, mid=handles["mid"], now=now)
            for (tenant, principal), token in handles["tokens"].items():
                scoped, actor = use.authenticate(rt2, token)
                assert (scoped.tenant, actor.id) == (tenant, principal)
            # no tenant named, nothing seen: the policies came back with the rows
            with rt2.engine.connect() as conn:
                assert conn.execute(sa.text("SELECT count(*) FROM items")).scalar() == 0
        appended_after_restore(fresh)
    for tenant in TENANTS:
        for key in before[tenant]:
            assert after[tenant][key] == before[tenant][key], (tenant, key)
    n_answers = sum(len(v) for a in before.values() for k, v in a.items() if k != "items")
    n_items = sum(len(a["items"]) for a in before.values())
    n_audit = sum(r.checked for r in heads.values())
    print(
        f"\nfigure 8: {n_items} items, {n_audit} audit rows, {len(TENANTS)} tenants,"
        f" {n_answers} answers equal; dump {size} bytes in {dumped:.2f}s,"
        f" restore in {restored:.2f}s"
    )


def appended_after_restore(url: str) -> None:
    """The application role's bulk audit append (migration 0014) came back with its
    grants: the catalog's function check holds on the restored database, and a bulk
    append as caveat_app goes through it and extends a chain that still verifies."""
    owner = db.make_engine(url)
    try:
        with owner.connect() as conn:
            assert function_problems(conn) == []
    finally:
        owner.dispose()
    sessions = db.tenant_sessions(db.make_app_engine(url, poolclass=sa.pool.NullPool), "acme")
    try:
        with sessions.begin() as s:
            assert claims._queries.row_security_active(session=s, table="audit_log")
            claims.append_many(
                session=s,
                tenant="acme",
                at=use.utcnow(),
                rows=[claims.PendingAudit("restore-check", "note", None, None, {})] * 100,
            )
        with sessions.begin() as s:
            assert claims.verify_chain(session=s, tenant="acme").ok
    finally:
        bind = sessions.kw.get("bind")
        if isinstance(bind, sa.Engine):
            bind.dispose()


def test_the_cli_dumps_and_restores_into_an_empty_database(
    db_url: str, pg_server_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``caveat db dump`` and ``caveat db restore`` on ``DATABASE_URL`` (the suite's
    server, where caveat_app exists: the restore finds it), then ``caveat audit verify``
    and a recall as an agent on the restored database."""
    with runtime(db_url, "acme") as rt:
        world(rt)
        use.observe(rt, ADMIN, [POOL_MAX_20])
        use.register_principal(rt, ADMIN, "agent-ir", role="agent", capabilities=[])
        item = precedent(rt)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    monkeypatch.setenv("CAVEAT_EMBEDDER", "none")
    file = tmp_path / "caveat.dump"
    monkeypatch.setenv("DATABASE_URL", db_url)
    assert run("db", "dump", str(file)).output.startswith(f"dumped {file.stat().st_size} bytes")
    with db.with_database(pg_server_url, prefix="caveat_r") as target:
        monkeypatch.setenv("DATABASE_URL", target)
        assert "role caveat_app present" in run("db", "restore", str(file)).output
        assert run("audit", "verify").output.startswith("audit chain holds")
        assert run("recall", QUERY, "--as", "agent-ir").output.startswith(f"1. [{item}] ")
        assert "caveat: conflict:" in run("db", "restore", str(file), ok=1).output
        assert "caveat: invalid_input:" in run("db", "restore", str(tmp_path / "no"), ok=2).output


def test_a_failed_dump_is_one_line_with_pg_dumps_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    out = run("db", "dump", str(tmp_path / "x.dump"), ok=1).output
    assert out.startswith("caveat: database_unavailable: pg_dump failed (exit 1): pg_dump: error:")
    assert "127.0.0.1" in out and "Traceback" not in out and len(out.strip().splitlines()) == 1


def test_a_dump_into_a_missing_directory_is_the_callers_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Said before pg_dump runs (so not the database's fault): exit 2, invalid_input,
    nothing written."""
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    missing = tmp_path / "no" / "such" / "x.dump"
    out = run("db", "dump", str(missing), ok=2).output
    assert out.startswith("caveat: invalid_input: no directory") and str(missing.parent) in out
    assert not (tmp_path / "no").exists()
    out = run("db", "dump", str(tmp_path), ok=2).output
    assert out.startswith("caveat: invalid_input:") and "is a directory" in out
