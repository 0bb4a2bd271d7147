"""Knowledge beside memory (model §6; docs/knowledge.md) at the application layer, over
real HTTP and from the command line, as the application's login role under row-level
security: Markdown files and directories read into documents, imported with their
passages' vectors in one transaction, listed and shown as the caller may read them,
revoked and redacted, and bad input as one typed line that imports nothing."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

import claims
import recall
from caveat import app as use
from caveat import db
from predicates.errors import Forbidden, InputError, NotFound
from tests.caveat._doors import two_tenants
from tests.caveat.test_cli_incident import run
from tests.caveat.test_sources_doors import served
from tests.conftest import ADMIN

SME = claims.Actor("sme-alice", "sme")
AGENT = claims.Actor("agent-ir", "agent")
INSIDER = claims.Actor("agent-p", "agent", frozenset({"payments-restricted"}))
FAILOVER = "# Failover\n\nPromote the replica.\n\n## Rollback\n\nDemote it.\n"
POOL = "# Pool exhausted\n\nRaise pool max to 50.\n"


@pytest.fixture
def rt(db_url: str) -> Iterator[use.Runtime]:
    with two_tenants(db_url) as runtime:
        for who in (AGENT, INSIDER, SME):
            use.register_principal(
                runtime, ADMIN, who.id, role=who.role, capabilities=sorted(who.capabilities)
            )
        embedder = recall.make_embedder("hashing")
        yield dataclasses.replace(runtime, embedder=embedder)


@pytest.fixture
def runbooks(tmp_path: Path) -> Path:
    root = tmp_path / "runbooks"
    (root / "db").mkdir(parents=True)
    (root / "db" / "failover.md").write_text(FAILOVER)
    (root / "pool.markdown").write_text(POOL)
    (root / "notes.txt").write_text("# not markdown\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD.md").write_text("# hidden\n")
    return root


def _count(db_url: str, sql: str) -> int:
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as c:
            return int(c.execute(sa.text(sql)).scalar_one())
    finally:
        engine.dispose()


# --- files -----------------------------------------------------------------------------


def test_documents_from_a_directory_and_a_file(runbooks: Path) -> None:
    docs = use.documents_from_paths([runbooks, runbooks / "pool.markdown"], uri_base=None)
    assert [(d.id, d.uri) for d in docs] == [
        ("db/failover.md", "file:db/failover.md"),
        ("pool.markdown", "file:pool.markdown"),
        ("pool.markdown", "file:pool.markdown"),
    ]
    based = use.documents_from_paths([runbooks], uri_base="https://git.example/rb/blob/main/")
    assert based[0].uri == "https://git.example/rb/blob/main/db/failover.md"
    assert all(not Path(d.id).is_absolute() for d in docs)


def test_bad_paths_are_input_errors_naming_the_file(runbooks: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        use.documents_from_paths([tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no Markdown"):
        use.documents_from_paths([tmp_path / "empty"])
    (runbooks / "latin1.md").write_bytes(b"# Caf\xe9\n")
    with pytest.raises(InputError, match=r"latin1\.md is not UTF-8: byte 0xe9 at offset 5"):
        use.documents_from_paths([runbooks])


# --- the use cases -----------------------------------------------------------------------


def test_import_embeds_in_the_same_transaction_and_reads_respect_access(
    rt: use.Runtime, runbooks: Path, db_url: str
) -> None:
    docs = use.documents_from_paths([runbooks])
    report = use.docs_import(rt, SME, docs[:1])
    secret = use.docs_import(rt, SME, docs[1:], readers=["payments-restricted"])
    assert [d.outcome for d in report.documents + secret.documents] == ["imported"] * 2
    vectors = _count(db_url, "SELECT count(*) FROM passage_embeddings WHERE tenant_id = 'acme'")
    assert vectors == len(report.passage_ids) + len(secret.passage_ids) == 3
    assert [d.id for d in use.docs_list(rt, AGENT)] == ["db/failover.md"]
    assert [d.id for d in use.docs_list(rt, INSIDER)] == ["db/failover.md", "pool.markdown"]
    with pytest.raises(NotFound):
        use.docs_show(rt, AGENT, "pool.markdown")
    shown = use.docs_show(rt, INSIDER, "db/failover.md")
    assert [p.ref for p in shown.passages] == [
        "doc:db/failover.md#failover",
        "doc:db/failover.md#rollback",
    ]
    # the other tenant sees none of it
    assert use.docs_list(rt.for_tenant("globex"), ADMIN) == []
    with pytest.raises(Forbidden, match="docs"):
        use.docs_import(rt, AGENT, docs[:1])


def test_a_bad_document_imports_nothing(rt: use.Runtime, db_url: str) -> None:
    good = claims.DocumentInput("good.md", "# ok\n\nfine\n")
    with pytest.raises(InputError, match="'bad id'"):
        use.docs_import(rt, SME, [good, claims.DocumentInput("bad id", "x")])
    assert _count(db_url, "SELECT count(*) FROM documents") == 0
    assert _count(db_url, "SELECT count(*) FROM passage_embeddings") == 0


# --- HTTP --------------------------------------------------------------------------------


def _client(base: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_http_routes(rt: use.Runtime) -> None:
    body: dict[str, Any] = {
        "documents": [
            {"id": "db/failover.md", "text": FAILOVER, "uri": "https://git.example/db/failover.md"},
            {"id": "pool.md", "text": POOL},
        ]
    }
    with (
        served(rt) as s,
        _client(s.base, s.tokens["sme"]) as sme,
        _client(s.base, s.tokens["agent"]) as agent,
    ):
        r = sme.post("/v1/docs", json=body)
        assert r.status_code == 200, r.text
        assert (r.json()["imported"], r.json()["passages"]) == (2, 3)
        again = sme.post("/v1/docs", json=body).json()
        assert again["unchanged"] == 2 and again["passages"] == 0
        secret = {"documents": [{"id": "secret.md", "text": POOL}], "readers": ["vault"]}
        assert sme.post("/v1/docs", json=secret).status_code == 200
        r = agent.post("/v1/docs", json=body)
        assert (r.status_code, r.json()["code"]) == (403, "forbidden")
        for bad in ({"documents": [{"id": "a b", "text": "x"}]}, {"documents": []}):
            r = sme.post("/v1/docs", json=bad)
            assert (r.status_code, r.json()["code"]) == (422, "invalid_input"), r.text
        r = sme.post("/v1/docs", json={**body, "readers": ["other"]})
        assert (r.status_code, r.json()["code"]) == (409, "conflict"), r.text
        listed = agent.get("/v1/docs").json()["documents"]
        assert [d["id"] for d in listed] == ["db/failover.md", "pool.md"]  # not secret.md
        shown = agent.get("/v1/docs/db/failover.md").json()
        assert [p["uri"] for p in shown["passages"]] == [
            "https://git.example/db/failover.md#failover",
            "https://git.example/db/failover.md#rollback",
        ]
        assert agent.get("/v1/docs/secret.md").status_code == 404
        assert agent.get("/v1/docs/nope.md").status_code == 404
        r = agent.post("/v1/docs/db/failover.md/revoke", json={"reason": "old"})
        assert r.status_code == 403
        r = sme.post("/v1/docs/db/failover.md/revoke", json={"reason": "old"})
        assert (r.status_code, r.json()["state"]) == (200, "revoked"), r.text
        assert agent.get("/v1/docs/db/failover.md").json()["passages"] == []
        r = sme.post("/v1/docs/db/failover.md/revoke", json={"reason": "old"})
        assert r.status_code == 409
        r = sme.post("/v1/docs/pool.md/redact", json={"reason": "a secret in it"})
        assert r.json() == {"id": "pool.md", "redacted": True, "passages": 1}
        assert agent.get("/v1/docs/pool.md").status_code == 404
        assert sme.post("/v1/docs/pool.md/redact", json={"reason": ""}).status_code == 422


# --- CLI ---------------------------------------------------------------------------------


@pytest.fixture
def cli_env(db_url: str, rt: use.Runtime, monkeypatch: pytest.MonkeyPatch, runbooks: Path) -> Path:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    monkeypatch.chdir(runbooks.parent)
    return runbooks


def test_cli_import_list_show_revoke_redact(cli_env: Path, db_url: str) -> None:
    out = run("docs", "import", "runbooks", "--uri-base", "https://git.example/rb").output
    assert "imported: db/failover.md v1, 2 passage(s)" in out
    assert "2 imported, 0 updated, 0 unchanged, 0 revoked (skipped); 3 passage(s)" in out
    assert "unchanged: db/failover.md v1" in run("docs", "import", "runbooks").output
    (cli_env / "db" / "failover.md").write_text(FAILOVER + "\n## Contacts\n\nDBA.\n")
    updated = json.loads(run("docs", "import", "runbooks", "--json").output)
    assert updated["documents"][0] == {
        "id": "db/failover.md",
        "outcome": "updated",
        "version": 2,
        "passages": 3,
        "superseded_version": 1,
    }
    (cli_env.parent / "secret.md").write_text(POOL)
    run("docs", "import", "secret.md", "--readers", "vault,ops", "--purpose", "x")
    [secret] = json.loads(run("docs", "list", "--json").output)["documents"][2:3]
    assert (secret["id"], secret["readers"], secret["purposes"]) == (
        "secret.md",
        ["ops", "vault"],
        ["x"],
    )
    listed = json.loads(run("docs", "list", "--json", "--as", "agent-ir").output)["documents"]
    assert [d["id"] for d in listed] == ["db/failover.md", "pool.markdown"]
    shown = run("docs", "show", "db/failover.md", "--as", "agent-ir").output
    assert "- doc:db/failover.md#contacts  (Failover / Contacts)" in shown
    assert "  v1  superseded" in shown and "  v2  current" in shown
    res = run("docs", "import", "runbooks", "--as", "agent-ir", ok=1)
    assert "may not docs" in res.output and "Traceback" not in res.output
    for args in (
        ("docs", "import", "missing"),
        ("docs", "import", "runbooks", "--deny", "nobody"),
        ("docs", "import", "runbooks", "--classification", "nope"),
        ("docs", "revoke", "db/failover.md", "--reason", " "),
    ):
        res = run(*args, ok=2)
        assert len(res.output.strip().splitlines()) == 1 and "Traceback" not in res.output
    before = _count(db_url, "SELECT count(*) FROM documents")
    (cli_env / "bad.md").write_bytes(b"\xff")
    res = run("docs", "import", "runbooks", ok=2)
    assert "bad.md is not UTF-8" in res.output
    assert _count(db_url, "SELECT count(*) FROM documents") == before
    (cli_env / "bad.md").unlink()
    assert (
        "revoked db/failover.md v2"
        in run("docs", "revoke", "db/failover.md", "--reason", "old").output
    )
    assert (
        "redacted db/failover.md: 5 passage(s)"
        in run("docs", "redact", "db/failover.md", "--reason", "secret").output
    )
    assert "no document" in run("docs", "show", "db/failover.md", ok=1).output


def test_the_embedding_round_embeds_passages_imported_without_an_embedder(
    rt: use.Runtime, db_url: str
) -> None:
    bare = dataclasses.replace(rt, embedder=None)
    report = use.docs_import(bare, SME, [claims.DocumentInput("db/failover.md", FAILOVER)])
    sql = "SELECT count(*) FROM passage_embeddings WHERE tenant_id = 'acme'"
    assert _count(db_url, sql) == 0
    assert rt.embed_pending(batch=1) == len(report.passage_ids) == 2  # one per transaction
    assert _count(db_url, sql) == 2 and rt.embed_pending() == 0
