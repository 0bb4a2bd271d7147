"""The labelled retrieval set (bench/data/paraphrases.jsonl): symptom queries as an
on-call engineer types them, each a paraphrase of one postmortem summary. The set fits
every corpus the benchmarks default to here: the project's own, always, and
../shared/data/postmortems.jsonl too when it is beside the project."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from bench import corpus

SET = Path(__file__).resolve().parents[2] / "bench" / "data" / "paraphrases.jsonl"
SPLIT_SEED = 20261201
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _rows() -> list[dict[str, str]]:
    return [json.loads(line) for line in SET.read_text().splitlines() if line.strip()]


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


#: The corpora present: the project's, and the shared one when it is there (not a skip:
#: a clone with nothing beside it has one corpus to check, and checks it).
CORPORA = [corpus.BUNDLED, *([corpus.SHARED] if corpus.SHARED.is_file() else [])]


@pytest.mark.parametrize("path", CORPORA, ids=lambda p: p.name)
def test_the_set_has_sixty_or_more_queries_with_one_known_target_each(path: Path) -> None:
    rows = _rows()
    summaries = {p.id for p in corpus.read(path).docs}
    assert len(rows) >= 60
    assert all(set(r) == {"query", "target", "split"} for r in rows)
    assert len({r["target"] for r in rows}) == len(rows)  # one query per target
    assert {r["target"] for r in rows} <= summaries


@pytest.mark.parametrize("path", CORPORA, ids=lambda p: p.name)
def test_no_query_copies_three_consecutive_words_of_its_summary(path: Path) -> None:
    summaries = {p.id: p.summary for p in corpus.read(path).docs}
    copied = {}
    for r in _rows():
        words = _words(summaries[r["target"]])
        trigrams = {tuple(words[i : i + 3]) for i in range(len(words) - 2)}
        q = _words(r["query"])
        hits = [tuple(q[i : i + 3]) for i in range(len(q) - 2) if tuple(q[i : i + 3]) in trigrams]
        if hits:
            copied[r["target"]] = hits
    assert copied == {}


def test_the_split_is_the_seeded_one() -> None:
    """Tune on two fifths, report on the rest; the split is derived from a fixed seed over
    the sorted targets, so it cannot be re-drawn after seeing results."""
    rows = _rows()
    order = sorted(r["target"] for r in rows)
    random.Random(SPLIT_SEED).shuffle(order)
    tune = set(order[: len(order) * 2 // 5])
    assert {r["target"]: r["split"] for r in rows} == {
        t: "tune" if t in tune else "test" for t in order
    }
