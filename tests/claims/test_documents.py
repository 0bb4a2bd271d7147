"""Knowledge beside memory (model §6; docs/knowledge.md), the store half: Markdown split
at its headings (laws by hypothesis), documents imported by version with the access of
their passages, each passage an evidence reference, revocation and redaction, reads that
never mention what the caller may not read, all against the real store, and once as the
application role under row-level security."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import sessionmaker

import claims
import recall
from caveat import db
from predicates.errors import Conflict, Forbidden, InputError, NotFound
from tests.conftest import T0, Store

RUNBOOK = """Owned by the payments team.

# Payments DB failover

When the primary is down.

## Check replication

```
# this is a shell comment, not a heading
psql -c 'select * from pg_stat_replication'
```

## Promote

Run `pg_ctl promote` on the replica.

Rollback
--------

Demote it again.

## Promote

The second one.

# Empty

# Contacts

DBA on call.
"""


def doc(ident: str = "runbooks/payments-db.md", text: str = RUNBOOK, **kw: Any) -> Any:
    return claims.DocumentInput(ident, text, uri=kw.pop("uri", f"file:{ident}"), **kw)


def rows(store: Store, sql: str, **params: Any) -> list[Any]:
    with store.sessions.begin() as s:
        return list(s.execute(sa.text(sql), {"t": store.tenant, **params}).all())


def do_import(store: Store, *docs: Any, now: Any = T0, **kw: Any) -> claims.ImportReport:
    with store.sessions.begin() as s:
        return claims.import_documents(
            session=s, tenant=store.tenant, actor=store.sme, now=now, documents=docs, **kw
        )


# --- splitting ---------------------------------------------------------------------------


def test_split_at_atx_and_setext_headings_not_in_code() -> None:
    sections = claims.split_markdown(RUNBOOK)
    assert [(s.heading_path, s.fragment) for s in sections] == [
        ((), "top"),
        (("Payments DB failover",), "payments-db-failover"),
        (("Payments DB failover", "Check replication"), "check-replication"),
        (("Payments DB failover", "Promote"), "promote"),
        (("Payments DB failover", "Rollback"), "rollback"),
        (("Payments DB failover", "Promote"), "promote-1"),
        (("Empty",), "empty"),
        (("Contacts",), "contacts"),
    ]
    check = sections[2]
    assert "# this is a shell comment" in check.text and check.text.startswith("## Check")
    assert sections[4].heading_lines == 2 and sections[4].body.strip() == "Demote it again."
    assert sections[6].empty and not sections[7].empty
    assert "".join(s.text for s in sections) == RUNBOOK


def test_fragments_are_githubs_anchors() -> None:
    text = "# Top\n\n# Step 1: `restart` the *pool*!\n\n# Ünïcode & co\n\n# !!!\n\n# Step 1\n"
    frags = [s.fragment for s in claims.split_markdown(text)]
    assert frags == ["top", "step-1-restart-the-pool", "ünïcode--co", "section", "step-1"]
    # the text before the first heading takes "top" first; a heading "Top" then is top-1
    assert [s.fragment for s in claims.split_markdown("x\n# Top\n")] == ["top", "top-1"]


_line = st.one_of(
    st.sampled_from(["", "text", "# A", "## B", "### C", "#### A", "```", "~~~", "===", "---"]),
    st.sampled_from(["- # in a list", "> # quoted", "    # indented code", "Title", "A b"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_line, max_size=30), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_split_laws(lines: list[str], newline: str, final: bool) -> None:
    text = newline.join(lines) + (newline if final and lines else "")
    sections = claims.split_markdown(text)
    # every line in exactly one section, in order: joining gives the document back
    assert "".join(s.text for s in sections) == text
    assert [s.start for s in sections[1:]] == [s.end for s in sections[:-1]]
    # fragments unique within the document
    assert len({s.fragment for s in sections}) == len(sections)
    # a heading's path is an earlier section's path (of a lower level) plus its own
    seen: dict[tuple[str, ...], int] = {(): 0}
    for s in sections:
        if not s.heading_path:
            assert s.level == 0 and s is sections[0]
            continue
        assert 1 <= s.level <= 6 and len(s.heading_path) <= s.level
        parent = s.heading_path[:-1]
        assert parent in seen and seen[parent] < s.level
        seen[s.heading_path] = s.level


# --- import ------------------------------------------------------------------------------


def test_import_stores_passages_with_their_access_and_evidence(tstore: Store) -> None:
    report = do_import(tstore, doc(), readers=["payments-restricted"], purposes=["Incident_x"])
    [out] = report.documents
    assert (out.outcome, out.version, out.superseded_version) == ("imported", 1, None)
    assert len(out.passage_ids) == 7 == len(report.passage_ids)  # "Empty" has no body
    stored = rows(
        tstore,
        "SELECT ordinal, heading_path, fragment, text, acl, purposes, fts::text AS fts "
        "FROM passages WHERE tenant_id = :t ORDER BY ordinal",
    )
    assert [r.fragment for r in stored] == [
        "top",
        "payments-db-failover",
        "check-replication",
        "promote",
        "rollback",
        "promote-1",
        "contacts",
    ]
    assert stored[3].text == "## Promote\n\nRun `pg_ctl promote` on the replica."
    assert all(r.acl == [["payments-restricted"]] for r in stored)
    assert all(r.purposes == ["incident_x"] for r in stored)
    assert "'failov'" in stored[3].fts  # the heading path is searchable in every passage
    [evidence] = rows(
        tstore,
        "SELECT title, uri, readers FROM evidence WHERE tenant_id = :t AND id = :id",
        id="doc:runbooks/payments-db.md#promote",
    )
    assert evidence.title == "Payments DB failover / Promote"
    assert evidence.uri == "file:runbooks/payments-db.md#promote"
    assert evidence.readers == ["payments-restricted"]
    [audit] = rows(
        tstore, "SELECT detail FROM audit_log WHERE tenant_id = :t AND action = 'docs_import'"
    )
    assert audit.detail["document"] == "runbooks/payments-db.md"
    assert audit.detail["passages"] == 7


def test_an_item_may_cite_a_passage(tstore: Store) -> None:
    do_import(tstore, doc())
    ref = claims.passage_ref("runbooks/payments-db.md", "promote")
    result = claims.write_item(
        sessions=tstore.sessions,
        tenant=tstore.tenant,
        actor=tstore.agent,
        now=T0,
        request=claims.ItemWrite.model_validate(
            {
                "kind": "fact",
                "subject": "payment-api",
                "attribute": "lag_returned_within_s",
                "object": 40,
                "evidence": [ref],
                "scope": {"axis": "case", "id": "INC-1"},
            }
        ),
    )
    assert result.outcome == "accepted"


def test_reimport_same_text_is_unchanged_and_changed_text_supersedes(tstore: Store) -> None:
    first = do_import(tstore, doc())
    again = do_import(tstore, doc(), now=T0 + timedelta(minutes=1))
    assert again.documents[0].outcome == "unchanged" and again.passage_ids == []
    changed = RUNBOOK.replace("DBA on call.", "DBA on call, then the SRE lead.")
    later = T0 + timedelta(hours=1)
    third = do_import(tstore, doc(text=changed), now=later)
    [out] = third.documents
    assert (out.outcome, out.version, out.superseded_version) == ("updated", 2, 1)
    old = rows(
        tstore,
        "SELECT withdrawn_at, withdrawn_reason FROM passages WHERE tenant_id = :t "
        "AND document_version = 1",
    )
    assert {(r.withdrawn_at, r.withdrawn_reason) for r in old} == {(later, "superseded")}
    with tstore.sessions.begin() as s:
        detail = claims.get_document(
            session=s, tenant=tstore.tenant, actor=tstore.agent, document_id=out.id
        )
    assert detail.document.version == 2 and detail.document.state == "current"
    assert [p.id for p in detail.passages] == list(out.passage_ids)
    assert detail.passages[-1].text.endswith("the SRE lead.")
    assert [(v.version, v.state) for v in detail.history] == [(1, "superseded"), (2, "current")]
    assert detail.passages[3].ref == "doc:runbooks/payments-db.md#promote"
    assert detail.passages[3].uri == "file:runbooks/payments-db.md#promote"
    # the reference survives the new version: the evidence row is the same one
    [ev] = rows(
        tstore, "SELECT count(*) AS n FROM evidence WHERE tenant_id = :t AND id LIKE 'doc:%'"
    )
    assert ev.n == len(first.passage_ids)
    assert (
        len(rows(tstore, "SELECT 1 FROM audit_log WHERE tenant_id = :t AND action = 'docs_import'"))
        == 2
    )


def test_access_is_fixed_at_the_first_import(tstore: Store) -> None:
    do_import(tstore, doc())
    before = rows(tstore, "SELECT count(*) AS n FROM documents WHERE tenant_id = :t")
    with pytest.raises(Conflict, match="other access"):
        do_import(tstore, doc(), readers=["incidents"])
    assert rows(tstore, "SELECT count(*) AS n FROM documents WHERE tenant_id = :t") == before


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (claims.DocumentInput("", "x"), "non-empty"),
        (claims.DocumentInput("has space.md", "x"), "whitespace"),
        (claims.DocumentInput("a#b", "x"), "'#'"),
        (claims.DocumentInput("bin.md", b"x"), "must be a string"),  # type: ignore[arg-type]
        (claims.DocumentInput("nul.md", "a\x00b"), "NUL"),
        (claims.DocumentInput("ok.md", "x"), "given twice"),
    ],
)
def test_bad_input_names_the_document_and_writes_nothing(
    tstore: Store, bad: Any, match: str
) -> None:
    before = rows(
        tstore, "SELECT (SELECT count(*) FROM documents) d, (SELECT count(*) FROM evidence) e"
    )
    with pytest.raises(InputError, match=match):
        do_import(tstore, doc("ok.md", "# fine\n\nbody\n"), bad)
    after = rows(
        tstore, "SELECT (SELECT count(*) FROM documents) d, (SELECT count(*) FROM evidence) e"
    )
    assert after == before


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"deny": ["nobody"]}, "deny entry"),
        ({"classification": "top-secret"}, "unknown classification"),
        ({"purposes": ["9lives"]}, "purpose"),
    ],
)
def test_bad_access_is_an_input_error(tstore: Store, kw: dict[str, Any], match: str) -> None:
    with pytest.raises(InputError, match=match):
        do_import(tstore, doc(), **kw)
    assert rows(tstore, "SELECT 1 FROM documents WHERE tenant_id = :t") == []


def test_agents_do_not_import_runbooks(tstore: Store) -> None:
    with tstore.sessions.begin() as s, pytest.raises(Forbidden, match="docs"):
        claims.import_documents(
            session=s, tenant=tstore.tenant, actor=tstore.agent, now=T0, documents=[doc()]
        )


# --- reads and withdrawal --------------------------------------------------------------


def test_a_restricted_document_is_unknown_to_a_caller_without_the_capability(
    tstore: Store,
) -> None:
    do_import(tstore, doc("open.md", "# Open\n\ntext\n"))
    do_import(tstore, doc("secret.md", "# Secret\n\ntext\n"), readers=["payments-restricted"])
    do_import(tstore, doc("denied.md", "# D\n\ntext\n"), deny=["principal:sme-alice"])
    with tstore.sessions.begin() as s:
        seen = {
            who.id: [
                d.id for d in claims.list_documents(session=s, tenant=tstore.tenant, actor=who)
            ]
            for who in (tstore.agent, tstore.sme)
        }
        with pytest.raises(NotFound) as err:
            claims.get_document(
                session=s, tenant=tstore.tenant, actor=tstore.agent, document_id="secret.md"
            )
    assert seen == {"agent-ir": ["denied.md", "open.md"], "sme-alice": ["open.md", "secret.md"]}
    assert str(err.value) == "no document 'secret.md'"  # the same words as for no document


def test_revoke_withdraws_the_passages_and_later_imports_skip_it(tstore: Store) -> None:
    do_import(tstore, doc())
    later = T0 + timedelta(hours=1)
    with tstore.sessions.begin() as s:
        record = claims.revoke_document(
            session=s,
            tenant=tstore.tenant,
            actor=tstore.sme,
            document_id="runbooks/payments-db.md",
            reason="outdated",
            now=later,
        )
    assert record.state == "revoked" and record.revoked_by == "sme-alice"
    assert {
        r.withdrawn_reason
        for r in rows(tstore, "SELECT withdrawn_reason FROM passages WHERE tenant_id = :t")
    } == {"revoked"}
    with tstore.sessions.begin() as s:
        detail = claims.get_document(
            session=s, tenant=tstore.tenant, actor=tstore.agent, document_id=record.id
        )
        [listed] = claims.list_documents(session=s, tenant=tstore.tenant, actor=tstore.agent)
        with pytest.raises(Conflict, match="revoked already"):
            claims.revoke_document(
                session=s,
                tenant=tstore.tenant,
                actor=tstore.sme,
                document_id=record.id,
                reason="again",
                now=later,
            )
    assert detail.passages == () and listed.state == "revoked" and listed.passages == 0
    changed = do_import(tstore, doc(text=RUNBOOK + "\nmore\n"), now=later)
    assert changed.documents[0].outcome == "revoked" and changed.passage_ids == []
    [audit] = rows(
        tstore, "SELECT detail FROM audit_log WHERE tenant_id = :t AND action = 'docs_revoke'"
    )
    assert audit.detail["reason"] == "outdated" and audit.detail["passages"] == 7


def test_redact_hides_every_version(tstore: Store) -> None:
    do_import(tstore, doc())
    do_import(tstore, doc(text=RUNBOOK + "\nmore\n"), now=T0 + timedelta(minutes=5))
    with tstore.sessions.begin() as s:
        n = claims.redact_document(
            session=s,
            tenant=tstore.tenant,
            actor=tstore.sme,
            document_id="runbooks/payments-db.md",
            reason="held a password",
            now=T0 + timedelta(hours=1),
        )
    assert n == 14  # both versions' passages, the superseded ones too
    reasons = rows(tstore, "SELECT DISTINCT withdrawn_reason FROM passages WHERE tenant_id = :t")
    assert [r.withdrawn_reason for r in reasons] == ["redacted"]
    with tstore.sessions.begin() as s:
        assert claims.list_documents(session=s, tenant=tstore.tenant, actor=tstore.sme) == []
        for who in (tstore.sme, claims.Actor("root", "admin")):
            with pytest.raises(NotFound):
                claims.get_document(
                    session=s,
                    tenant=tstore.tenant,
                    actor=who,
                    document_id="runbooks/payments-db.md",
                )
    with tstore.sessions.begin() as s, pytest.raises(InputError, match="reason"):
        claims.revoke_document(
            session=s, tenant=tstore.tenant, actor=tstore.sme, document_id="x", reason=" ", now=T0
        )


def test_passages_are_embedded_once_in_the_items_space(tstore: Store) -> None:
    report = do_import(tstore, doc())
    embedder = _hashing()
    with tstore.sessions.begin() as s:
        first = recall.embed_passages(
            session=s,
            tenant=tstore.tenant,
            embedder=embedder,
            now=T0,
            passage_ids=[report.passage_ids[0]],
        )
        rest = recall.embed_passages(session=s, tenant=tstore.tenant, embedder=embedder, now=T0)
        again = recall.embed_passages(session=s, tenant=tstore.tenant, embedder=embedder, now=T0)
    assert (first, rest, again) == (1, 6, 0)
    stored = rows(tstore, "SELECT model, dim FROM passage_embeddings WHERE tenant_id = :t")
    assert {(r.model, r.dim) for r in stored} == {(embedder.name, embedder.dimension)}


# --- as the application role -----------------------------------------------------------


@pytest.fixture
def app_sessions(tstore: Store) -> Iterator[sessionmaker[Any]]:
    engine = db.make_app_engine(tstore.engine.url.render_as_string(hide_password=False))
    yield db.tenant_sessions(engine, tstore.tenant)
    engine.dispose()


def test_the_application_role_imports_reads_and_withdraws(
    tstore: Store, app_sessions: sessionmaker[Any]
) -> None:
    with app_sessions.begin() as s:
        assert s.execute(sa.text("SELECT current_user")).scalar() == "caveat_app"
        report = claims.import_documents(
            session=s, tenant=tstore.tenant, actor=tstore.sme, now=T0, documents=[doc()]
        )
        claims.import_documents(
            session=s,
            tenant=tstore.tenant,
            actor=tstore.sme,
            now=T0 + timedelta(minutes=1),
            documents=[doc(text=RUNBOOK + "\nmore\n")],
        )
        n = recall.embed_passages(session=s, tenant=tstore.tenant, embedder=_hashing(), now=T0)
        assert n == 7  # only the current version's passages are live
        claims.revoke_document(
            session=s,
            tenant=tstore.tenant,
            actor=tstore.sme,
            document_id=report.documents[0].id,
            reason="r",
            now=T0 + timedelta(minutes=2),
        )
        claims.redact_document(
            session=s,
            tenant=tstore.tenant,
            actor=tstore.sme,
            document_id=report.documents[0].id,
            reason="r",
            now=T0 + timedelta(minutes=3),
        )
        assert claims.list_documents(session=s, tenant=tstore.tenant, actor=tstore.sme) == []
    with app_sessions.begin() as s:
        report = claims.verify_chain(session=s, tenant=tstore.tenant)
    assert report.ok


def _hashing() -> Any:
    embedder = recall.make_embedder("hashing")
    assert embedder is not None
    return embedder


def test_doc_evidence_ids_are_reserved_for_passages(tstore: Store) -> None:
    with (
        tstore.sessions.begin() as s,
        pytest.raises(InputError, match="passages of imported documents"),
    ):
        claims.register_evidence(
            session=s,
            tenant=tstore.tenant,
            evidence_id="doc:runbooks/payments-db.md#promote",
            actor=tstore.sme,
            now=T0,
        )


def test_the_title_is_the_first_heading_else_the_id(tstore: Store) -> None:
    do_import(
        tstore,
        doc("a.md", "# Payments\n## Failover\n\nPromote.\n"),
        doc("b.md", "no heading at all\n"),
        doc("c.md", "# Ignored\n\nx\n", title="Given"),
    )
    with tstore.sessions.begin() as s:
        listed = claims.list_documents(session=s, tenant=tstore.tenant, actor=tstore.sme)
    assert [(d.id, d.title, d.passages) for d in listed] == [
        ("a.md", "Payments", 1),
        ("b.md", "b.md", 1),
        ("c.md", "Given", 1),
    ]
