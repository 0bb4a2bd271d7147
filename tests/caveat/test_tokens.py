"""API tokens through the application layer and the CLI, as the login role.

Tokens are stored hashed; the principal's stored role and capabilities win; a token
never reaches another tenant; revoking one ends it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import claims
import recall
from caveat import app as use
from caveat import db
from caveat.cli import app
from predicates.errors import Conflict, Forbidden, Unauthenticated

runner = CliRunner()


@pytest.fixture
def rt(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[use.Runtime]:
    monkeypatch.setenv("DATABASE_URL", db_url)
    with use.serving("acme", None) as (runtime, admin):
        for tenant in ("acme", "globex"):
            use.declare_tenant(runtime.for_tenant(tenant), admin)
        use.register_principal(runtime, admin, "sme-alice", role="sme", capabilities=["incidents"])
        yield runtime


def test_a_token_stands_for_its_principal_and_is_stored_hashed(
    rt: use.Runtime, db_url: str
) -> None:
    admin = use.LOCAL_ADMIN
    issued = use.create_token(rt, admin, "agent-ir", role="agent", capabilities=["incidents"])
    scoped, actor = use.authenticate(rt, issued.token)
    assert scoped.tenant == "acme"
    assert (actor.id, actor.role, actor.capabilities) == ("agent-ir", "agent", {"incidents"})
    # the principal was created with the token's role and capabilities
    with rt.transaction() as s:
        stored = s.execute(
            sa.text("SELECT role, capabilities FROM principals WHERE id = 'agent-ir'")
        ).one()
    assert tuple(stored) == ("agent", ["incidents"])
    owner = db.make_engine(db_url)
    try:
        with owner.connect() as conn:
            kept = conn.execute(sa.text("SELECT secret_sha256 FROM api_tokens")).scalars().all()
            audit = conn.execute(sa.text("SELECT detail::text FROM audit_log")).scalars().all()
    finally:
        owner.dispose()
    secret = issued.token.rsplit(".", 1)[1]
    assert kept == [hashlib.sha256(secret.encode()).hexdigest()]
    assert not any(secret in row for row in audit)


def test_the_principal_wins_and_a_token_never_carries_more(rt: use.Runtime) -> None:
    admin = use.LOCAL_ADMIN
    with pytest.raises(Conflict, match="is a sme"):
        use.create_token(rt, admin, "sme-alice", role="agent")
    with pytest.raises(Forbidden, match="lacks payments-restricted"):
        use.create_token(rt, admin, "sme-alice", role="sme", capabilities=["payments-restricted"])
    narrow = use.create_token(rt, admin, "sme-alice", role="sme", capabilities=[])
    _, actor = use.authenticate(rt, narrow.token)
    assert actor.role == "sme" and actor.capabilities == frozenset()
    full = use.create_token(rt, admin, "sme-alice", role="sme")
    # the principal loses a capability later: the token loses it too
    use.register_principal(rt, admin, "sme-alice", role="sme", capabilities=[])
    _, actor = use.authenticate(rt, full.token)
    assert actor.capabilities == frozenset()
    with pytest.raises(Forbidden):
        use.create_token(rt, _agent(rt), "x", role="agent")


def _agent(rt: use.Runtime) -> claims.Actor:
    issued = use.create_token(rt, use.LOCAL_ADMIN, "agent-b", role="agent")
    return use.authenticate(rt, issued.token)[1]


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t + "x",  # wrong secret
        lambda t: t.replace("cvt1.", "cvt2.", 1),  # not a token
        lambda t: "",
        lambda t: "cvt1.%%%.a.b",  # tenant not base64
        lambda t: ".".join([*t.split(".")[:2], "000000000000", t.split(".")[3]]),  # no such id
    ],
)
def test_a_mangled_token_does_not_authenticate(rt: use.Runtime, mangle: object) -> None:
    issued = use.create_token(rt, use.LOCAL_ADMIN, "agent-ir", role="agent")
    with pytest.raises(Unauthenticated):
        use.authenticate(rt, mangle(issued.token))  # type: ignore[operator]


def test_no_token_reaches_another_tenant_and_a_revoked_one_ends(rt: use.Runtime) -> None:
    acme = use.create_token(rt, use.LOCAL_ADMIN, "agent-ir", role="agent")
    globex = rt.for_tenant("globex")
    # the same id and secret presented under globex's name: globex has no such token
    head, _tenant, rest = acme.token.split(".", 2)
    as_globex = f"{head}.{base64.urlsafe_b64encode(b'globex').decode().rstrip('=')}.{rest}"
    with pytest.raises(Unauthenticated, match="unknown token"):
        use.authenticate(rt, as_globex)
    assert use.list_tokens(globex, use.LOCAL_ADMIN) == []
    revoked = use.revoke_token(rt, use.LOCAL_ADMIN, acme.info.id)
    assert revoked.revoked_at is not None
    with pytest.raises(Unauthenticated, match="revoked"):
        use.authenticate(rt, acme.token)


def test_the_application_role_may_only_revoke_a_token_never_rewrite_it(
    rt: use.Runtime,
) -> None:
    use.create_token(rt, use.LOCAL_ADMIN, "agent-ir", role="agent")
    for column in ("secret_sha256", "principal", "capabilities"):
        with (
            pytest.raises(sa.exc.ProgrammingError, match="permission denied"),
            rt.sessions.begin() as s,
        ):
            s.execute(sa.text(f"UPDATE api_tokens SET {column} = DEFAULT"))
    with (
        pytest.raises(sa.exc.ProgrammingError, match="permission denied"),
        rt.sessions.begin() as s,
    ):
        s.execute(sa.text("DELETE FROM api_tokens"))


def test_token_commands(rt: use.Runtime) -> None:
    args = ["--tenant", "acme"]
    made = runner.invoke(
        app, ["token", "create", "--principal", "agent-ir", "--role", "agent", *args, "--json"]
    )
    assert made.exit_code == 0, made.output
    out = json.loads(made.output)
    assert out["token"].startswith("cvt1.") and out["principal"] == "agent-ir"
    listed = json.loads(runner.invoke(app, ["token", "list", *args, "--json"]).output)
    assert [t["id"] for t in listed] == [out["id"]]
    assert "token" not in listed[0] and out["token"] not in json.dumps(listed)
    by_agent = runner.invoke(app, ["token", "list", *args, "--as", "agent-ir"])
    assert by_agent.exit_code == 1 and "forbidden" in by_agent.output
    gone = runner.invoke(app, ["token", "revoke", out["id"], *args])
    assert gone.exit_code == 0 and f"token {out['id']} revoked" in gone.output
    missing = runner.invoke(app, ["token", "revoke", "nope", *args])
    assert missing.exit_code == 1 and "not_found" in missing.output
    clash = runner.invoke(
        app, ["token", "create", "--principal", "agent-ir", "--role", "sme", *args]
    )
    assert clash.exit_code == 1 and "conflict" in clash.output


# --- the token cache (issue 27): one statement per request while nothing changed ------


@pytest.fixture
def other(rt: use.Runtime, db_url: str) -> Iterator[use.Runtime]:
    """A second server process's runtime on the same store: its own engine and caches."""
    engine = db.make_app_engine(db_url)
    try:
        yield use.Runtime.over(engine, "acme")
    finally:
        engine.dispose()


def _statements(rt: use.Runtime) -> list[str]:
    """Every statement ``rt``'s engine sends through SQLAlchemy from now on."""
    seen: list[str] = []
    sa.event.listen(rt.engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


def test_a_cached_token_costs_one_statement_and_its_actor_carries_the_team(
    rt: use.Runtime,
) -> None:
    issued = use.create_token(rt, use.LOCAL_ADMIN, "agent-ir", role="agent", team="payments")
    _, first = use.authenticate(rt, issued.token)
    seen = _statements(rt)
    _, again = use.authenticate(rt, issued.token)
    assert again is first and first.team == "payments"
    assert seen == ["SELECT caveat_credentials_version(%s)"]
    # a recall as that actor reads no principal: the team came with the token
    seen.clear()
    use.recall_items(rt, again, recall.RecallRequest(query="pool"))
    assert not [s for s in seen if "FROM principals" in s]
    # an actor built by hand has not read its team: recall reads it
    seen.clear()
    use.recall_items(rt, claims.Actor("agent-ir", "agent"), recall.RecallRequest(query="pool"))
    assert [s for s in seen if "FROM principals" in s]


def test_a_cached_token_still_needs_its_secret(rt: use.Runtime) -> None:
    issued = use.create_token(rt, use.LOCAL_ADMIN, "agent-ir", role="agent")
    use.authenticate(rt, issued.token)
    head, secret = issued.token.rsplit(".", 1)
    for wrong in (f"{head}.{secret}x", f"{head}.{secret[:-1]}", f"{head}.{'A' * len(secret)}"):
        with pytest.raises(Unauthenticated, match="unknown token"):
            use.authenticate(rt, wrong)
    assert use.authenticate(rt, issued.token)[1].id == "agent-ir"


def test_a_revocation_elsewhere_ends_a_cached_token_at_once(
    rt: use.Runtime, other: use.Runtime
) -> None:
    issued = use.create_token(rt, use.LOCAL_ADMIN, "agent-ir", role="agent")
    kept = use.create_token(rt, use.LOCAL_ADMIN, "agent-kept", role="agent")
    for token in (issued.token, kept.token):
        use.authenticate(rt, token)
    assert len(rt.tokens) == 2
    use.revoke_token(other, use.LOCAL_ADMIN, issued.info.id)  # another process revokes
    with pytest.raises(Unauthenticated, match="revoked"):
        use.authenticate(rt, issued.token)
    assert use.authenticate(rt, kept.token)[1].id == "agent-kept"


def test_a_change_to_the_principal_or_the_policy_elsewhere_is_read_at_once(
    rt: use.Runtime, other: use.Runtime
) -> None:
    issued = use.create_token(rt, use.LOCAL_ADMIN, "sme-alice", role="sme")
    _, before = use.authenticate(rt, issued.token)
    assert before.capabilities == {"incidents"} and before.team is None
    use.register_principal(other, use.LOCAL_ADMIN, "sme-alice", role="sme", capabilities=[])
    assert use.authenticate(rt, issued.token)[1].capabilities == frozenset()
    use.create_token(other, use.LOCAL_ADMIN, "sme-alice", role="sme", team="storage")
    assert use.authenticate(rt, issued.token)[1].team == "storage"
    levels = ["public", "internal", "confidential", "restricted", "secret"]
    use.policy_set(other, use.LOCAL_ADMIN, {"classification_levels": levels})
    assert use.authenticate(rt, issued.token)[1].levels == tuple(levels)


def test_every_write_to_principals_or_tokens_moves_the_credentials_version(
    rt: use.Runtime, db_url: str
) -> None:
    """Statement triggers: a write by any path, the owner's raw SQL included."""
    issued = use.create_token(rt, use.LOCAL_ADMIN, "agent-ir", role="agent")
    seen = [rt.credentials_version()]
    owner = db.make_engine(db_url)
    try:
        for statement in (
            "UPDATE api_tokens SET capabilities = '{}' WHERE tenant_id = 'acme'",
            "UPDATE principals SET team = 'x' WHERE tenant_id = 'acme' AND id = 'agent-ir'",
            "DELETE FROM api_tokens WHERE tenant_id = 'acme'",
            "UPDATE principals SET team = NULL WHERE tenant_id = 'nobody'",  # no row: no move
        ):
            with owner.begin() as c:
                c.execute(sa.text(statement))
            seen.append(rt.credentials_version())
    finally:
        owner.dispose()
    assert seen[0] < seen[1] < seen[2] < seen[3] == seen[4]
    assert rt.for_tenant("globex").credentials_version() < seen[1]  # only acme's moved
    assert rt.for_tenant("nobody").credentials_version() == -1
    with pytest.raises(Unauthenticated):
        use.authenticate(rt, issued.token)


def test_the_cache_keeps_the_most_recently_used_tokens() -> None:
    cache = claims.TokenCache(maxsize=2)
    tokens = [f"cvt1.YWNtZQ.id{i}.secret{i}" for i in range(3)]
    actors = [claims.Actor(f"a{i}", "agent") for i in range(3)]
    cache.put(tokens[0], 7, actors[0])
    cache.put(tokens[1], 7, actors[1])
    assert cache.get(tokens[0], 7) is actors[0]  # used: now the most recent
    cache.put(tokens[2], 7, actors[2])
    assert [cache.get(t, 7) for t in tokens] == [actors[0], None, actors[2]]
    assert cache.get(tokens[0], 8) is None and len(cache) == 2
