"""Deny lists and classification levels (docs/claims.md, "Access control"), as the
application's login role under row-level security.

The read gate in SQL (``claims._queries.readable``) agrees with the Python check
(``Actor.can_read_acl``) and with the item door on every item of a world that holds
every combination of readers, deny list and level; adding a deny never makes more
visible, raising a clearance never makes less visible. Bad values are typed errors at
every door (the use case, HTTP, the CLI) and write nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import claims
import factgen
import recall
from caveat import app as use
from caveat import db
from caveat.cli import app as cli
from claims import _queries as cq
from predicates.errors import CaveatError
from tests.caveat._doors import world
from tests.conftest import ADMIN

LEVELS = ("public", "internal", "confidential", "restricted")
READERS: tuple[tuple[str, ...], ...] = ((), ("c1",))
DENIES: tuple[tuple[str, ...], ...] = (
    (),
    ("principal:p1",),
    ("cap:c2",),
    ("principal:p1", "cap:c2"),
)
CLASSES: tuple[str | None, ...] = (None, "internal", "confidential", "restricted")
#: One evidence source, and one item formed from it, per combination.
COMBOS = [(r, d, c) for r in READERS for d in DENIES for c in CLASSES]


def _eid(n: int) -> str:
    return f"E-combo-{n}"


@pytest.fixture
def gated(db_url: str) -> Iterator[tuple[use.Runtime, dict[int, int]]]:
    """A tenant with an item per combination (item id -> combination index)."""
    engine = db.make_app_engine(db_url)
    rt = use.Runtime.over(engine, "acme")
    world(rt)
    use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"])
    ids: dict[int, int] = {}
    for n, (readers, deny, level) in enumerate(COMBOS):
        use.add_evidence(rt, ADMIN, _eid(n), readers=readers, deny=deny, classification=level)
        body = {
            "kind": "fact",
            "subject": "payment-api",
            "attribute": f"combo_{n}",
            "object": True,
            "evidence": [_eid(n)],
            "scope": {"axis": "case", "id": "INC-1"},
            "text": f"combination {n}",
        }
        item_id = use.write(rt, ADMIN, claims.ItemWrite.model_validate(body)).item_id
        assert item_id is not None
        ids[item_id] = n
    yield rt, ids
    engine.dispose()


def _visible(rt: use.Runtime, actor: claims.Actor) -> set[int]:
    """The items the SQL read gate lets ``actor`` read, as the application role."""
    with rt.transaction() as s:
        rows = s.execute(
            sa.text(
                f"SELECT i.id FROM items i WHERE i.tenant_id = :tenant "
                f"AND {cq.readable('i', caps=':caps', admin=':admin')}"
            ),
            {"tenant": rt.tenant, **actor.gate_params("caps")},
        )
        return {int(r[0]) for r in rows}


def _reference(actor: claims.Actor, n: int) -> bool:
    """The rules as docs/claims.md states them, written apart from the code."""
    readers, deny, level = COMBOS[n]
    if actor.role == "admin":
        return True
    names = {f"principal:{actor.id}", *(f"cap:{c}" for c in actor.capabilities | actor.held)}
    if names & set(deny):
        return False
    if level is not None and LEVELS.index(level) > LEVELS.index(actor.clearance):
        return False
    return not readers or bool(actor.capabilities & set(readers))


actors = st.builds(
    lambda who, caps, held, clearance, admin: claims.Actor(
        who, "admin" if admin else "agent", frozenset(caps), clearance, held=frozenset(held)
    ),
    st.sampled_from(["p1", "p2"]),
    st.sets(st.sampled_from(["c1", "c2", "c3"])),
    st.sets(st.sampled_from(["c2", "c3"])),
    st.sampled_from(LEVELS),
    st.integers(0, 9).map(lambda n: n == 0),
)


def test_the_sql_gate_agrees_with_the_reference_and_is_monotone(
    gated: tuple[use.Runtime, dict[int, int]],
) -> None:
    rt, ids = gated

    @settings(
        max_examples=40,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(actor=actors)
    def check(actor: claims.Actor) -> None:
        seen = _visible(rt, actor)
        assert seen == {i for i, n in ids.items() if _reference(actor, n)}
        with rt.transaction() as s:
            records = claims.get_items(session=s, tenant=rt.tenant, ids=sorted(ids))
        assert seen == {i for i, rec in records.items() if rec.readable_by(actor)}
        # adding a deny never makes more visible
        by_combo = {n: i for i, n in ids.items()}
        for i, (readers, deny, level) in enumerate(COMBOS):
            for j, (readers2, deny2, level2) in enumerate(COMBOS):
                if (readers, level) == (readers2, level2) and set(deny) < set(deny2):
                    assert by_combo[j] not in seen or by_combo[i] in seen, (COMBOS[i], COMBOS[j])
        # raising the clearance never makes less visible
        for higher in LEVELS[LEVELS.index(actor.clearance) + 1 :]:
            raised = claims.Actor(actor.id, actor.role, actor.capabilities, higher, held=actor.held)
            assert seen <= _visible(rt, raised)
        # and adding a capability to deny (the principal holds it) never shows more
        assert _visible(rt, claims.Actor(
            actor.id, actor.role, actor.capabilities, actor.clearance,
            held=actor.held | {"c2"},
        )) <= seen  # fmt: skip

    check()
    # the world is not trivial: an ordinary principal reads some and not all
    plain = _visible(rt, claims.Actor("p2", "agent", frozenset({"c1"})))
    assert plain and plain != set(ids)


def test_the_item_door_answers_as_the_gate(gated: tuple[use.Runtime, dict[int, int]]) -> None:
    """The use case (the Python check) and the SQL gate agree for a stored principal
    read back with its clearance (``get_actor``)."""
    rt, ids = gated
    use.register_principal(rt, ADMIN, "p1", role="agent", capabilities=["c1"], clearance="public")
    with rt.transaction() as s:
        p1 = claims.get_actor(session=s, tenant=rt.tenant, principal="p1")
    assert p1.clearance == "public"
    opened = set()
    for item_id in ids:
        try:
            use.item(rt, p1, item_id)
            opened.add(item_id)
        except CaveatError as exc:
            assert exc.code == "not_found"
    assert opened == _visible(rt, p1) == {i for i, n in ids.items() if _reference(p1, n)}


def test_an_item_inherits_the_union_of_denies_and_the_strictest_level(db_url: str) -> None:
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"])
        use.add_evidence(rt, ADMIN, "E-a", deny=["principal:p1"], classification="internal")
        use.add_evidence(rt, ADMIN, "E-b", deny=[" cap:c2", "cap:c2"], classification="restricted")
        use.add_evidence(rt, ADMIN, "E-c", classification="public")
        body = {
            "kind": "fact",
            "subject": "payment-api",
            "attribute": "derived",
            "object": True,
            "evidence": ["E-a", "E-b", "E-c"],
            "scope": {"axis": "case", "id": "INC-1"},
        }
        item_id = use.write(rt, ADMIN, claims.ItemWrite.model_validate(body)).item_id
        assert item_id is not None
        rec = use.item(rt, ADMIN, item_id)
        assert (rec.deny, rec.classification) == (("cap:c2", "principal:p1"), "restricted")
        unclassified = {**body, "attribute": "plain", "evidence": ["E-1"]}
        plain = use.write(rt, ADMIN, claims.ItemWrite.model_validate(unclassified)).item_id
        assert plain is not None
        assert (use.item(rt, ADMIN, plain).deny, use.item(rt, ADMIN, plain).classification) == (
            (),
            None,
        )
    finally:
        engine.dispose()


# --- bad values: typed errors at every door, nothing written ---------------------------


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"classification": "confidental"}, "did you mean 'confidential'"),
        ({"classification": "secret"}, "public, internal, confidential, restricted"),
        ({"deny": ["principl:alice"]}, "did you mean 'principal'"),
        ({"deny": ["alice"]}, "is not principal:<id> or cap:<capability>"),
        ({"deny": ["cap:"]}, "is not principal:<id> or cap:<capability>"),
    ],
)
def test_bad_evidence_access_is_a_typed_error_that_writes_nothing(
    db_url: str, fields: dict[str, object], says: str
) -> None:
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        with pytest.raises(CaveatError) as raised:
            use.add_evidence(rt, ADMIN, "E-bad", **fields)  # type: ignore[arg-type]
        assert raised.value.code == "invalid_input" and says in raised.value.message
        assert raised.value.detail["field"] in {"classification", "deny"}
        use.add_evidence(rt, ADMIN, "E-bad")  # nothing was registered
    finally:
        engine.dispose()


def test_token_clearance_is_checked(db_url: str) -> None:
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        with pytest.raises(CaveatError) as unknown:
            use.create_token(rt, ADMIN, "p1", role="agent", clearance="restricte")
        assert unknown.value.code == "invalid_input"
        assert "did you mean 'restricted'" in unknown.value.message
        with rt.transaction() as s:  # nothing written: no principal either
            assert s.execute(sa.text("SELECT count(*) FROM principals")).scalar_one() == 0
        made = use.create_token(rt, ADMIN, "p1", role="agent")
        assert made.info.clearance == "internal"  # the default of a new principal
        lower = use.create_token(rt, ADMIN, "p1", role="agent", clearance="public")
        assert lower.info.clearance == "public"
        with pytest.raises(CaveatError) as above:
            use.create_token(rt, ADMIN, "p1", role="agent", clearance="confidential")
        assert above.value.code == "forbidden" and "cleared for internal" in above.value.message
        assert [t.clearance for t in use.list_tokens(rt, ADMIN)] == ["public", "internal"] or [
            t.clearance for t in use.list_tokens(rt, ADMIN)
        ] == ["internal", "public"]
        _, bearer = use.authenticate(rt, lower.token)
        assert bearer.clearance == "public"
    finally:
        engine.dispose()


def test_the_http_door_takes_deny_classification_and_clearance(db_url: str) -> None:
    from caveat.api import create_app
    from tests.caveat.test_http import loopback

    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        token = use.create_token(rt, ADMIN, "ops", role="admin").token
        with (
            loopback(create_app(rt)) as base,
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as c,
        ):
            good = c.post(
                "/v1/evidence",
                json={"id": "E-9", "deny": ["cap:contractor"], "classification": "confidential"},
            )
            bad = c.post("/v1/evidence", json={"id": "E-10", "classification": "confidental"})
            deny = c.post("/v1/evidence", json={"id": "E-11", "deny": ["contractor"]})
            cleared = c.post(
                "/v1/tokens", json={"principal": "vendor", "role": "agent", "clearance": "public"}
            )
            unknown = c.post(
                "/v1/tokens", json={"principal": "v2", "role": "agent", "clearance": "top"}
            )
    finally:
        engine.dispose()
    assert good.status_code == 201, good.text
    assert good.json() == {
        "evidence": "E-9",
        "readers": [],
        "deny": ["cap:contractor"],
        "classification": "confidential",
    }
    assert (bad.status_code, bad.json()["code"]) == (422, "invalid_input")
    assert "did you mean 'confidential'" in bad.json()["detail"]
    assert (deny.status_code, deny.json()["code"]) == (422, "invalid_input")
    assert cleared.status_code == 201 and cleared.json()["clearance"] == "public"
    assert (unknown.status_code, unknown.json()["code"]) == (422, "invalid_input")


def test_the_cli_takes_deny_classification_and_clearance(
    db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    runner = CliRunner()
    with use.serving("acme", None) as (rt, _):
        world(rt)
    res = runner.invoke(
        cli,
        ["evidence", "add", "E-9", "--deny", "cap:contractor", "--deny", "principal:bob",
         "--classification", "restricted", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == {
        "evidence": "E-9",
        "readers": [],
        "deny": ["cap:contractor", "principal:bob"],
        "classification": "restricted",
    }
    bad = runner.invoke(cli, ["evidence", "add", "E-10", "--classification", "confidental"])
    assert bad.exit_code == 2 and "did you mean 'confidential'" in bad.output, bad.output
    assert "Traceback" not in bad.output
    denied = runner.invoke(cli, ["evidence", "add", "E-11", "--deny", "bob"])
    assert denied.exit_code == 2 and "principal:<id> or cap:<capability>" in denied.output
    made = runner.invoke(
        cli, ["token", "create", "--principal", "vendor", "--role", "agent",
              "--clearance", "public", "--json"],
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    assert json.loads(made.output)["clearance"] == "public"
    listed = runner.invoke(cli, ["token", "list"])
    assert "public" in listed.output


def test_the_context_guard_and_an_as_of_recall_keep_the_gate(db_url: str) -> None:
    """An active item denied to the reader: the context guard drops it as it drops an id
    never written, and a recall as of an instant (the history path) never returns it."""
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"])
        use.add_evidence(rt, ADMIN, "E-deny", deny=["principal:p1"])
        use.add_evidence(rt, ADMIN, "E-high", classification="restricted")
        ids = {}
        for name, evidence in (("open", "E-1"), ("denied", "E-deny"), ("high", "E-high")):
            body = {
                "kind": "fact",
                "subject": "payment-api",
                "attribute": f"gate_{name}",
                "object": True,
                "required": ["config.connection_pool.max eq 20"],
                "evidence": [evidence],
                "scope": {"axis": "case", "id": "INC-1"},
                "text": f"gate {name}: payment api connection pool exhausted",
            }
            item_id = use.write(rt, ADMIN, claims.ItemWrite.model_validate(body)).item_id
            assert item_id is not None
            use.promote(rt, ADMIN, item_id, to="shadow")
            use.promote(rt, ADMIN, item_id, to="active")
            ids[name] = item_id
        use.observe(
            rt, ADMIN, [factgen.Observation("payment-api", "config.connection_pool.max", 20)]
        )
        p1 = use.register_principal(rt, ADMIN, "p1", role="agent", capabilities=[])
        never = 987_654_321
        guard = use.check_context(rt, p1, [ids["open"], ids["denied"], ids["high"], never])
        assert guard.usable == (ids["open"],)
        assert guard.dropped[ids["denied"]] == guard.dropped[ids["high"]] == guard.dropped[never]
        as_of = datetime.now(UTC)
        asked = recall.RecallRequest(query="payment api pool", as_of=as_of, explain=True)
        then = use.recall_items(rt, p1, asked)
        assert [r.item.id for r in then.items] == [ids["open"]]
        assert {w.item.id for w in then.withheld} <= {ids["open"]}
        operator = use.recall_items(rt, ADMIN, asked)
        assert {r.item.id for r in operator.items} == set(ids.values())
    finally:
        engine.dispose()


# --- changing the levels: a stored level is a name, so levels in use keep their order -----

REORDERED = ["public", "internal", "restricted", "confidential"]


def _levels_world(rt: use.Runtime) -> int:
    """An item formed from restricted and confidential evidence (stored ``restricted``,
    the strictest), and p1 cleared for confidential: it may not read the item."""
    world(rt)
    use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"])
    use.add_evidence(rt, ADMIN, "E-r", classification="restricted")
    use.add_evidence(rt, ADMIN, "E-c", classification="confidential")
    body = {
        "kind": "fact",
        "subject": "payment-api",
        "attribute": "leveled",
        "object": True,
        "evidence": ["E-r", "E-c"],
        "scope": {"axis": "case", "id": "INC-1"},
    }
    item_id = use.write(rt, ADMIN, claims.ItemWrite.model_validate(body)).item_id
    assert item_id is not None and use.item(rt, ADMIN, item_id).classification == "restricted"
    use.register_principal(rt, ADMIN, "p1", role="agent", clearance="confidential")
    return item_id


def _p1_reads(rt: use.Runtime, item_id: int) -> bool:
    with rt.transaction() as s:
        p1 = claims.get_actor(session=s, tenant=rt.tenant, principal="p1")
    return item_id in _visible(rt, p1)


def test_levels_in_use_may_not_be_reordered_or_dropped_at_any_door(db_url: str) -> None:
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        item_id = _levels_world(rt)
        assert not _p1_reads(rt, item_id)
        version = use.policy_show(rt, ADMIN).version
        for dry_run in (True, False):
            with pytest.raises(CaveatError) as raised:
                use.policy_set(rt, ADMIN, {"classification_levels": REORDERED}, dry_run=dry_run)
            err = raised.value
            assert err.code == "invalid_input" and err.detail["key"] == "classification_levels"
            assert err.detail["given"] == REORDERED
            assert err.detail["in_use"] == {
                "confidential": ["evidence", "principals"],
                "restricted": ["evidence", "items"],
            }
            assert "it reorders them as restricted, confidential" in err.message
        # a rename (confidential -> secret) would hide everything stored under the old name
        renamed = ["public", "internal", "secret", "restricted"]
        with pytest.raises(CaveatError) as dropped:
            use.policy_set(rt, ADMIN, {"classification_levels": renamed})
        assert "it drops confidential" in dropped.value.message
        # declare_tenant (the replay's and an application's way to set a whole policy)
        for levels in (REORDERED, renamed):
            with pytest.raises(CaveatError) as declared:
                policy = factgen.TenantPolicy(classification_levels=tuple(levels))
                use.declare_tenant(rt, ADMIN, policy=policy)
            assert declared.value.code == "invalid_input"
            assert declared.value.detail["key"] == "classification_levels"
        assert use.policy_show(rt, ADMIN).version == version  # nothing stored
        assert not _p1_reads(rt, item_id)
        # new levels go anywhere; a level nobody uses may move or go
        added = ["unrated", "public", "internal", "confidential", "secret", "restricted"]
        use.policy_set(rt, ADMIN, {"classification_levels": added})
        moved = ["unrated", "secret", "public", "internal", "confidential", "restricted"]
        use.declare_tenant(rt, ADMIN, policy=factgen.TenantPolicy(classification_levels=moved))
        use.policy_set(rt, ADMIN, {"classification_levels": list(LEVELS)})
        assert use.policy_show(rt, ADMIN).version == version + 3
        assert not _p1_reads(rt, item_id)
        # a level used by a token only is in use too
        use.policy_set(rt, ADMIN, {"classification_levels": [*LEVELS, "top"]})
        use.register_principal(rt, ADMIN, "p9", role="agent", clearance="top")
        use.create_token(rt, ADMIN, "p9", role="agent", clearance="top")
        use.register_principal(rt, ADMIN, "p9", role="agent", clearance="internal")
        with pytest.raises(CaveatError) as token:
            use.policy_set(rt, ADMIN, {"classification_levels": list(LEVELS)})
        assert token.value.detail["in_use"]["top"] == ["tokens"]
    finally:
        engine.dispose()


def test_http_and_the_cli_refuse_reordering_levels_in_use(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from caveat.api import create_app
    from tests.caveat.test_cli_incident import run
    from tests.caveat.test_http import loopback

    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        item_id = _levels_world(rt)
        token = use.create_token(rt, ADMIN, "ops", role="admin").token
        change = {"changes": [{"key": "classification_levels", "value": REORDERED}]}
        with (
            loopback(create_app(rt)) as base,
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as c,
        ):
            dry = c.put("/v1/policy?dry_run=true", json=change)
            put = c.put("/v1/policy", json=change)
    finally:
        engine.dispose()
    for r in (dry, put):
        assert (r.status_code, r.json()["code"]) == (422, "invalid_input"), r.text
        assert r.json()["key"] == "classification_levels" and r.json()["given"] == REORDERED
        assert r.json()["in_use"]["restricted"] == ["evidence", "items"]
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    res = run("policy", "set", "classification_levels", json.dumps(REORDERED), ok=2)
    assert "invalid_input: policy key classification_levels" in res.output
    assert "restricted (evidence, items)" in res.output and "Traceback" not in res.output
    assert item_id
