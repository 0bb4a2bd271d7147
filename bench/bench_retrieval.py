"""Ranking quality on paraphrased symptom queries against a plain BM25 baseline (issue 10).

``python -m bench retrieval [--split test|tune|all] [--corpus PATH] [--json] [--knowledge]``

Loads the incident summaries (bench/corpus.py: the 190 of
../shared/data/postmortems.jsonl when present, else the project's 80 of
bench/data/incidents.jsonl, or ``--corpus PATH``) as episodes through the write
path, one subject per organisation, each with a condition that holds and its own
evidence, promoted to ``active`` by an SME; then asks every query of
bench/data/paraphrases.jsonl through the runtime's ``recall`` as an agent (the
application's role, no subject, limit 10) and reports, per ranking, hit@1, hit@5 and
MRR (the reciprocal rank of the target within the top 10, 0 when it is not there).
The baseline is ``rank_bm25.BM25Okapi`` over the same summaries, lowercase words as
tokens.

With ``--knowledge`` (issue 26), the same summaries as documents instead: each one
Markdown document (``postmortem_markdown``: a title, ``## Summary`` its first
sentence, ``## Details`` the rest when there is a rest, ``## Source`` its organisation),
imported by an SME through ``caveat.app.docs_import`` (split at the headings, the
passages embedded in the import's transaction), and every query asked as the agent with
``sources: [knowledge]`` (limit 30 passages); a document's rank is the rank of its best
passage among the documents, so hit@k means a passage of the target document within the
top k documents. BM25 ranks the same passages (their heading path and text, what the
store's ``fts`` indexes), a document by its best passage too.

The set is split (``split`` in the file: two fifths ``tune``, the rest
``test``, from a fixed seed, tests/bench/test_paraphrases.py); report ``test``,
tune weights on ``tune`` only. Uses ``DATABASE_URL`` when set, else an
embedded PostgreSQL in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from rank_bm25 import BM25Okapi
from sqlalchemy.orm import Session

import claims
import factgen
import lifecycle
import recall
from bench import bench_database, corpus
from bench.bench_claims import T0
from bench.bench_recall import _SENTENCE, runtime
from bench.corpus import Postmortem
from caveat import app, db
from predicates import ValueType

#: Who loads a benchmark's world (schema, entities, principals, facts).
ADMIN = factgen.Actor("bench-loader", "admin")

PARAPHRASES = Path(__file__).resolve().parent / "data" / "paraphrases.jsonl"
TENANT = "retrieval"
SME = claims.Actor("sme-bench", "sme", frozenset({"incidents"}))
AGENT = claims.Actor("agent-bench", "agent", frozenset({"incidents"}))
LOADER = claims.Actor("bench-loader", "admin")
NOW = T0 + timedelta(days=30)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@dataclass(frozen=True)
class Query:
    query: str
    target: str
    split: str


def postmortems() -> list[Postmortem]:
    """This run's corpus (``bench.corpus.current``), in file order."""
    return list(corpus.current().docs)


def queries(split: str = "test") -> list[Query]:
    """The labelled queries of ``split`` (``all``: every one) whose target is in this
    run's corpus (every one is in both default corpora; a ``--corpus`` may hold fewer)."""
    rows = [json.loads(line) for line in PARAPHRASES.read_text().splitlines() if line.strip()]
    known = {p.id for p in corpus.current().docs}
    return [
        Query(**r) for r in rows if (split == "all" or r["split"] == split) and r["target"] in known
    ]


# --- knowledge passages (issue 26) ---------------------------------------------------

#: Passages a knowledge recall asks for: at most three per document, so enough for the
#: top ten documents.
KNOWLEDGE_LIMIT = 30


def document_id(p: Postmortem) -> str:
    """The id a postmortem's document is imported under (as a directory import names
    ``postmortems/<id>.md``)."""
    return f"postmortems/{p.id}.md"


def postmortem_markdown(p: Postmortem) -> str:
    """A postmortem as the Markdown document an SRE team keeps: a title, ``## Summary``
    (the summary's first sentence), ``## Details`` (the other sentences; left out when
    there are none) and ``## Source`` (who published it)."""
    sentences = _SENTENCE.split(p.summary.strip())
    parts = [f"# {p.organisation} postmortem {p.id}", "", "## Summary", "", sentences[0], ""]
    if len(sentences) > 1:
        parts += ["## Details", "", " ".join(sentences[1:]), ""]
    parts += ["## Source", "", f"Published by {p.organisation}.", ""]
    return "\n".join(parts)


def knowledge_documents(docs: Sequence[Postmortem]) -> list[claims.DocumentInput]:
    """One document per postmortem, in corpus order (titled by its first heading)."""
    return [claims.DocumentInput(document_id(p), postmortem_markdown(p)) for p in docs]


def passage_texts(docs: Sequence[Postmortem]) -> list[tuple[str, str]]:
    """``(postmortem id, text)`` of every passage the import stores, in document order:
    the sections with a body (``claims.split_markdown``), each as its ``fts`` reads it,
    the heading path and then the section's text."""
    out = []
    for p in docs:
        for section in claims.split_markdown(postmortem_markdown(p)):
            if not section.empty:
                out.append((p.id, " ".join((*section.heading_path, section.text.strip()))))
    return out


def by_document(ranked: Sequence[str]) -> list[str]:
    """A ranking of passages (each named by its document) as a ranking of documents:
    each document at the rank of its best passage."""
    return list(dict.fromkeys(ranked))


def bm25_passage_ranker(docs: Sequence[Postmortem]) -> Callable[[str], list[str]]:
    """BM25 over the passages: postmortem ids, each at its best passage, best first."""
    rank = _bm25(passage_texts(docs))
    return lambda text: by_document(rank(text))


def _setup_tenant(s: Session) -> None:
    """The tenant and its SME and agent, in ``s``'s transaction."""
    factgen.ensure_tenant(actor=ADMIN, session=s, tenant=TENANT, now=T0)
    for actor in (SME, AGENT):
        claims.register_principal(
            actor=ADMIN,
            session=s,
            tenant=TENANT,
            principal=actor.id,
            role=actor.role,
            capabilities=sorted(actor.capabilities),
        )


def load_knowledge(url: str, docs: Sequence[Postmortem], embedder: recall.Embedder | None) -> int:
    """The tenant, its SME and agent, and the postmortems imported as documents by the
    SME (readers ``incidents``, the agent's capability) with their passages embedded by
    ``embedder``; returns the passages stored."""
    engine = db.make_engine(url)
    try:
        with db.tenant_sessions(engine, TENANT).begin() as s:
            _setup_tenant(s)
    finally:
        engine.dispose()
    rt = runtime(url, TENANT, embedder=embedder)
    try:
        report = app.docs_import(
            rt, SME, knowledge_documents(docs), readers=sorted(AGENT.capabilities), now=T0
        )
    finally:
        rt.engine.dispose()
    return len(report.passage_ids)


def _ask_knowledge(
    url: str, asked: Sequence[Query], embedder: recall.Embedder | None
) -> list[list[str]]:
    """Each query as the agent with ``sources: [knowledge]``: postmortem ids, each at
    its best passage."""
    rt = runtime(url, TENANT, embedder=embedder)
    back = {document_id(p): p.id for p in postmortems()}
    try:
        out = []
        for q in asked:
            request = recall.RecallRequest(
                query=q.query, limit=KNOWLEDGE_LIMIT, sources=("knowledge",)
            )
            res = rt.recall(AGENT, request, NOW)
            out.append(by_document([back[p.document_id] for p in res.knowledge]))
        return out
    finally:
        rt.engine.dispose()


def knowledge_run(split: str, embedder_name: str = "minilm") -> dict[str, Any]:
    """Import the postmortems as documents, ask every query of ``split`` with
    ``sources: [knowledge]`` full text only and fused (with ``embedder_name``), and
    score both beside BM25 over the same passages."""
    docs = postmortems()
    asked = queries(split)
    embedder = recall.make_embedder(embedder_name)
    targets = [q.target for q in asked]
    out: dict[str, Any] = {
        "split": split,
        "corpus": corpus.current().label,
        "documents": len(docs),
        "passages": len(passage_texts(docs)),
        "embedder": embedder_name,
        "knowledge": True,
    }
    with bench_database() as url:
        db.migrate(url)
        started = time.perf_counter()
        stored = load_knowledge(url, docs, embedder)
        out["import_s"] = round(time.perf_counter() - started, 2)
        if stored != out["passages"]:
            raise RuntimeError(f"{stored} passages stored, {out['passages']} expected")
        out["caveat_fulltext"] = scores(_ask_knowledge(url, asked, None), targets)
        if embedder is not None:
            out["caveat_fused"] = scores(_ask_knowledge(url, asked, embedder), targets)
    bm25 = bm25_passage_ranker(docs)
    out["bm25"] = scores([bm25(q.query) for q in asked], targets)
    return out


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


def load(url: str, docs: Sequence[Postmortem]) -> dict[int, str]:
    """Store every summary as an active episode; returns item id -> postmortem id."""
    engine = db.make_engine(url)
    sessions = db.tenant_sessions(engine, TENANT)
    subjects = sorted({_slug(p.organisation) for p in docs})
    try:
        with sessions.begin() as s:
            _setup_tenant(s)
            factgen.declare_attributes(
                actor=ADMIN,
                session=s,
                tenant=TENANT,
                specs=[factgen.AttributeSpec("service.serving", ValueType.parse("bool"))],
            )
            world = factgen.load_world(session=s, tenant=TENANT)
            factgen.import_entities(
                actor=ADMIN,
                session=s,
                world=world,
                entities=[factgen.EntitySpec(name, "service") for name in subjects],
            )
            for p in docs:
                claims.register_evidence(
                    session=s, tenant=TENANT, evidence_id=f"E-{p.id}", actor=SME, now=T0
                )
            world = factgen.load_world(session=s, tenant=TENANT)
            factgen.observe(
                actor=ADMIN,
                session=s,
                world=world,
                observations=[
                    factgen.Observation(name, "service.serving", True, "bench") for name in subjects
                ],
                observed_at=T0,
                now=T0,
            )
        result = claims.write_batch(
            sessions=sessions,
            tenant=TENANT,
            requests=[
                claims.ItemWrite.model_validate(
                    {
                        "kind": "episode",
                        "subject": _slug(p.organisation),
                        "attribute": "postmortem",
                        "object": p.id,
                        "required": ["service.serving eq true"],
                        "evidence": [f"E-{p.id}"],
                        "scope": {"axis": "case", "id": f"INC-{p.id}"},
                        "text": p.summary,
                    }
                )
                for p in docs
            ],
            actor=LOADER,
            now=T0,
        )
        ids: dict[int, str] = {}
        for p, outcome in zip(docs, result.outcomes, strict=True):
            if outcome.outcome != "accepted" or outcome.item_id is None:
                raise RuntimeError(f"{p.id} was not stored: {outcome}")
            ids[outcome.item_id] = p.id
        with sessions.begin() as s:
            for item_id in ids:
                for to in ("shadow", "active"):
                    lifecycle.promote(
                        session=s,
                        tenant=TENANT,
                        item_id=item_id,
                        to=to,  # type: ignore[arg-type]
                        actor=SME,
                        now=T0,
                    )
        return ids
    finally:
        engine.dispose()


def tokens(text: str) -> list[str]:
    """BM25's tokens: lowercase words."""
    return [w.lower() for w in _WORD.findall(text)]


def _bm25(entries: Sequence[tuple[str, str]]) -> Callable[[str], list[str]]:
    """BM25 over the ``(label, text)`` entries: every entry's label, best first (ties
    in entry order)."""
    index = BM25Okapi([tokens(text) for _, text in entries])

    def rank(text: str) -> list[str]:
        scores = index.get_scores(tokens(text))
        order = sorted(range(len(entries)), key=lambda i: (-scores[i], i))
        return [entries[i][0] for i in order]

    return rank


def bm25_ranker(docs: Sequence[Postmortem]) -> Callable[[str], list[str]]:
    """The plain BM25 baseline: postmortem ids, best first."""
    return _bm25([(p.id, p.summary) for p in docs])


def scores(ranked: Sequence[Sequence[str]], targets: Sequence[str], k: int = 10) -> dict[str, Any]:
    """hit@1, hit@5 and MRR (within the top ``k``) of each target in its ranking."""
    ranks = [
        list(r[:k]).index(t) + 1 if t in r[:k] else None
        for r, t in zip(ranked, targets, strict=True)
    ]
    n = max(len(ranks), 1)
    return {
        "hit@1": round(sum(1 for r in ranks if r == 1) / n, 3),
        "hit@5": round(sum(1 for r in ranks if r is not None and r <= 5) / n, 3),
        "mrr": round(sum(1 / r for r in ranks if r is not None) / n, 3),
        "queries": len(ranks),
    }


#: The rankings reported: the fusion weights each runs with, and whether it has the
#: dense channel. ``fulltext`` is the same code path with no embedder.
RANKINGS: dict[str, tuple[recall.Fusion | None, bool]] = {
    "caveat_fulltext": (None, False),
    "caveat_dense": (recall.Fusion(lexical=0.0, dense=1.0, entity=0.0), True),
    "caveat_fused": (None, True),
}

#: The grid ``--tune`` searches on the tune split (lexical and dense weights; entity
#: overlap has no part in these queries, which name no subject).
TUNE_GRID = [(lex, dense) for lex in (0.5, 1.0, 2.0) for dense in (0.5, 1.0, 1.5, 2.0, 3.0, 4.0)]


def _ask(
    url: str,
    ids: dict[int, str],
    asked: Sequence[Query],
    embedder: recall.Embedder | None,
    fusion: recall.Fusion,
) -> list[list[str]]:
    rt = runtime(url, TENANT, embedder=embedder, fusion=fusion)
    try:
        out = []
        for q in asked:
            res = rt.recall(AGENT, recall.RecallRequest(query=q.query, limit=10), NOW)
            out.append([ids[r.item.id] for r in res.items])
        return out
    finally:
        rt.engine.dispose()


def _drain(url: str, embedder: recall.Embedder) -> float:
    """Embed every queued summary; items per second."""
    rt = runtime(url, TENANT, embedder=embedder)
    try:
        started = time.perf_counter()
        n = rt.embed_pending(batch=64)
        return n / (time.perf_counter() - started)
    finally:
        rt.engine.dispose()


#: Lexical scorings compared on the same OR query over the summaries' ``english``
#: tsvectors (``--lexical``): how the lexical channel's scoring was chosen.
LEXICAL_SCORINGS = {
    "ts_rank_cd(fts, q, 32)": "ts_rank_cd(fts, q, 32)",
    "ts_rank(fts, q)": "ts_rank(fts, q)",
    "ts_rank(fts, q, 1)": "ts_rank(fts, q, 1)",
    "ts_rank(fts, q, 2)": "ts_rank(fts, q, 2)",
}


def lexical_study(split: str) -> dict[str, Any]:
    """hit@1 / hit@5 / MRR of each ``LEXICAL_SCORINGS`` entry on ``split``, on a scratch
    table of the summaries (the query built as recall builds it: an OR of its words)."""
    docs = postmortems()
    asked = queries(split)
    targets = [q.target for q in asked]
    out: dict[str, Any] = {"split": split, "corpus": corpus.current().label}
    with bench_database() as url:
        dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TEMP TABLE d (id text, fts tsvector)")
            conn.cursor().executemany(
                "INSERT INTO d VALUES (%s, to_tsvector('english', %s))",
                [(p.id, p.summary) for p in docs],
            )
            for name, expr in LEXICAL_SCORINGS.items():
                ranked = []
                for q in asked:
                    words = " | ".join(sorted({w.lower() for w in _WORD.findall(q.query)}))
                    rows = conn.execute(
                        f"SELECT id FROM d, to_tsquery('english', %s) q WHERE fts @@ q "
                        f"ORDER BY {expr} DESC, id LIMIT 10",
                        (words,),
                    ).fetchall()
                    ranked.append([r[0] for r in rows])
                out[name] = scores(ranked, targets)
    return out


def run(split: str, embedder_name: str = "minilm", tune: bool = False) -> dict[str, Any]:
    """Load the summaries, embed them, ask every query of ``split`` through each ranking,
    score them beside BM25; with ``tune``, score the fusion grid instead."""
    docs = postmortems()
    asked = queries(split)
    embedder = recall.make_embedder(embedder_name)
    targets = [q.target for q in asked]
    out: dict[str, Any] = {
        "split": split,
        "corpus": corpus.current().label,
        "documents": len(docs),
        "embedder": embedder_name,
    }
    with bench_database() as url:
        db.migrate(url)
        ids = load(url, docs)
        if embedder is not None:
            out["embed_items_per_s"] = round(_drain(url, embedder), 1)
        if tune:
            assert embedder is not None, "tuning needs an embedder"
            out["grid"] = [
                {
                    "lexical": lex,
                    "dense": dense,
                    **scores(
                        _ask(url, ids, asked, embedder, recall.Fusion(lexical=lex, dense=dense)),
                        targets,
                    ),
                }
                for lex, dense in TUNE_GRID
            ]
            return out
        for name, (fusion, dense) in RANKINGS.items():
            if dense and embedder is None:
                continue
            out[name] = scores(
                _ask(url, ids, asked, embedder if dense else None, fusion or recall.FUSION),
                targets,
            )
    bm25 = bm25_ranker(docs)
    out["bm25"] = scores([bm25(q.query) for q in asked], targets)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench retrieval")
    parser.add_argument("--split", choices=["test", "tune", "all"], default="test")
    parser.add_argument("--embedder", default="minilm", help="minilm (default), hashing or none")
    parser.add_argument(
        "--tune", action="store_true", help="score the fusion weight grid (use --split tune)"
    )
    parser.add_argument(
        "--lexical", action="store_true", help="compare lexical scorings (use --split tune)"
    )
    parser.add_argument(
        "--knowledge",
        action="store_true",
        help="the summaries as documents, asked with sources: [knowledge] (issue 26)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    corpus.add_argument(parser)
    args = parser.parse_args(argv)
    corpus.from_args(parser, args)
    if args.knowledge:
        got = knowledge_run(args.split, args.embedder)
        if args.json:
            print(json.dumps(got))
            return 0
        print(
            f"corpus {got['corpus']} as {got['documents']} documents, {got['passages']} "
            f"passages; split {args.split}, {args.embedder}, sources: [knowledge]\n"
        )
        print("| ranking | hit@1 | hit@5 | MRR |\n|---|---|---|---|")
        for name in ("caveat_fulltext", "caveat_fused", "bm25"):
            if name in got:
                r = got[name]
                print(f"| {name} | {r['hit@1']} | {r['hit@5']} | {r['mrr']} |")
        return 0
    if args.lexical:
        study = lexical_study(args.split)
        if args.json:
            print(json.dumps(study))
            return 0
        print(f"corpus {study['corpus']}, split {args.split}, full-text only\n")
        print("| scoring | hit@1 | hit@5 | MRR |")
        print("|---|---|---|---|")
        for name in LEXICAL_SCORINGS:
            r = study[name]
            print(f"| `{name}` | {r['hit@1']} | {r['hit@5']} | {r['mrr']} |")
        return 0
    result = run(args.split, args.embedder, args.tune)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"corpus {result['corpus']}, split {result['split']}, {args.embedder}\n")
    if args.tune:
        print("| lexical | dense | hit@1 | hit@5 | MRR |\n|---|---|---|---|---|")
        for g in result["grid"]:
            print(f"| {g['lexical']} | {g['dense']} | {g['hit@1']} | {g['hit@5']} | {g['mrr']} |")
        return 0
    print("| ranking | hit@1 | hit@5 | MRR |\n|---|---|---|---|")
    for name in (*RANKINGS, "bm25"):
        if name in result:
            r = result[name]
            print(f"| {name} | {r['hit@1']} | {r['hit@5']} | {r['mrr']} |")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
