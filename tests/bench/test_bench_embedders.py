"""The embedder benchmark's harness, with the hashing embedder only (no torch)."""

from __future__ import annotations

import json

import pytest

import recall
from bench import bench_embedders as be
from bench import corpus
from bench.bench_retrieval import Query
from bench.corpus import Postmortem

DOCS = [
    Postmortem("pm-a", "A", "database connection pool exhausted under peak load"),
    Postmortem("pm-b", "B", "TLS certificate expired on the edge load balancer"),
    Postmortem("pm-c", "C", "DNS resolution failed after a bad resolver config push"),
    Postmortem("pm-d", "D", "disk filled up on the logging host and writes stopped"),
]


def test_evaluate_scores_known_answers() -> None:
    asked = [
        Query("connection pool exhausted on the database", "pm-a", "test"),  # rank 1
        Query("expired TLS certificate", "pm-b", "test"),  # rank 1
        Query("expired TLS certificate", "pm-c", "test"),  # not first: pm-b is
        Query("zebra giraffe", "pm-d", "test"),  # no shared word: anywhere
    ]
    encoder = be.Symmetric(recall.HashingEmbedder())
    got = be.evaluate(encoder, DOCS, asked, k=10)
    # every document is in the top 10 of a 4-document corpus: recompute from the ranks
    corpus = encoder.passages([p.summary for p in DOCS])
    ranks = []
    for q in asked:
        sims = corpus @ encoder.queries([q.query])[0]
        order = sorted(range(len(DOCS)), key=lambda i: (-sims[i], i))
        ranks.append([DOCS[i].id for i in order].index(q.target) + 1)
    assert ranks[:2] == [1, 1]
    assert ranks[2] > 1
    assert got["queries"] == 4
    assert got["hit@1"] == round(sum(r == 1 for r in ranks) / 4, 3)
    assert got["hit@5"] == 1.0
    assert got["mrr"] == round(sum(1 / r for r in ranks) / 4, 3)
    assert got["ms_per_query"] > 0
    assert got["ms_per_query_p95"] >= got["ms_per_query"]
    assert got["corpus_texts_per_s"] > 0


def test_evaluate_counts_a_target_outside_the_top_k_as_a_miss() -> None:
    asked = [
        Query("expired TLS certificate", "pm-c", "test"),  # pm-b is first: a miss at k=1
        Query("dns resolver config", "pm-c", "test"),  # pm-c is first
    ]
    got = be.evaluate(be.Symmetric(recall.HashingEmbedder()), DOCS, asked, k=1)
    assert (got["hit@1"], got["hit@5"], got["mrr"]) == (0.5, 0.5, 0.5)


def test_main_runs_the_hashing_embedder_on_the_real_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert be.main(["--models", "hashing", "--split", "tune", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    used = corpus.read(corpus.default_path())
    assert out["documents"] == len(used.docs)
    assert out["corpus"] == used.label
    assert out["split"] == "tune"
    assert list(out["models"]) == ["hashing"]
    r = out["models"]["hashing"]
    assert r["queries"] == out["queries"] > 0
    assert 0 <= r["hit@1"] <= r["hit@5"] <= 1
    assert r["hit@1"] <= r["mrr"] <= 1
    assert set(r) >= {"ms_per_query", "corpus_texts_per_s", "load_s"}


def test_main_refuses_an_unknown_model() -> None:
    with pytest.raises(SystemExit):
        be.main(["--models", "hashing,word2vec"])
