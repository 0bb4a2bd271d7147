"""The retrieval benchmark's knowledge run (issue 26): the postmortems as documents,
their passages as the store holds them, and documents ranked by their best passage."""

from __future__ import annotations

import sqlalchemy as sa

import claims
import recall
from bench import bench_retrieval as bq
from bench.corpus import Postmortem

ONE = Postmortem("pm-900", "Acme", "The pool ran dry.")
THREE = Postmortem(
    "pm-901",
    "Initech",
    "A config push broke DNS. Resolvers failed for 2 hours. It was rolled back.",
)


def test_a_postmortem_is_a_titled_document_split_into_summary_details_and_source() -> None:
    sections = [s for s in claims.split_markdown(bq.postmortem_markdown(THREE)) if not s.empty]
    assert [s.heading_path for s in sections] == [
        ("Initech postmortem pm-901", "Summary"),
        ("Initech postmortem pm-901", "Details"),
        ("Initech postmortem pm-901", "Source"),
    ]
    assert [s.body.strip() for s in sections] == [
        "A config push broke DNS.",
        "Resolvers failed for 2 hours. It was rolled back.",
        "Published by Initech.",
    ]
    # one sentence: no Details section, and the title alone is no passage
    one = [s.heading_path[-1] for s in claims.split_markdown(bq.postmortem_markdown(ONE))]
    assert one == ["Acme postmortem pm-900", "Summary", "Source"]
    assert bq.passage_texts([ONE]) == [
        ("pm-900", "Acme postmortem pm-900 Summary ## Summary\n\nThe pool ran dry."),
        ("pm-900", "Acme postmortem pm-900 Source ## Source\n\nPublished by Acme."),
    ]


def test_every_corpus_document_has_several_passages_that_keep_the_whole_summary() -> None:
    docs = bq.postmortems()
    texts = bq.passage_texts(docs)
    for p in docs:
        mine = [t for pid, t in texts if pid == p.id]
        assert 2 <= len(mine) <= 3
        body = " ".join(t.split("\n\n", 1)[1] for t in mine[:-1])
        # the corpus's own spacing is kept (pm-048 of ../shared has a double space)
        assert body.split() == p.summary.split()


def test_a_document_ranks_at_its_best_passage() -> None:
    assert bq.by_document(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]
    ranked = [bq.by_document(r) for r in (["x", "t", "t"], ["t", "x"], ["x", "x", "y"])]
    got = bq.scores(ranked, ["t", "t", "t"])
    assert got == {"hit@1": round(1 / 3, 3), "hit@5": round(2 / 3, 3), "mrr": 0.5, "queries": 3}
    rank = bq.bm25_passage_ranker([ONE, THREE, Postmortem("pm-902", "Hooli", "Disk full.")])
    assert rank("resolvers failed, rolled back")[0] == "pm-901"
    assert sorted(rank("anything")) == ["pm-900", "pm-901", "pm-902"]  # each document once


def test_imported_postmortems_are_recalled_as_knowledge_by_their_words(
    engine: sa.Engine, db_url: str
) -> None:
    docs = bq.postmortems()[:12]
    stored = bq.load_knowledge(db_url, docs, recall.HashingEmbedder())
    assert stored == len(bq.passage_texts(docs))
    with engine.connect() as c:
        c.execute(sa.text("SELECT set_config('caveat.tenant', :t, false)"), {"t": bq.TENANT})
        n_vec = c.execute(sa.text("SELECT count(*) FROM passage_embeddings")).scalar_one()
        n_docs = c.execute(sa.text("SELECT count(DISTINCT document_id) FROM passages")).scalar_one()
    assert (n_vec, n_docs) == (stored, 12)
    target = docs[4]
    asked = [bq.Query(target.summary, target.id, "test")]
    for embedder in (None, recall.HashingEmbedder()):
        ranked = bq._ask_knowledge(db_url, asked, embedder)
        assert ranked[0][0] == target.id
        assert len(ranked[0]) == len(set(ranked[0]))
