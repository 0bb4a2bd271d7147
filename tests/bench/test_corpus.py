"""The benchmarks' corpus (bench/corpus.py): the project's own summaries in a clone with
nothing beside it, the shared 190 when they are there, ``--corpus PATH`` when given, and
the output says which."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import bench_embedders as be
from bench import bench_retrieval as bq
from bench import corpus


@pytest.fixture(autouse=True)
def _fresh_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test chooses its own corpus; the process's choice is restored after it."""
    monkeypatch.setattr(corpus, "_chosen", [])


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_clone_with_nothing_beside_it_runs_on_the_project_corpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(corpus, "SHARED", tmp_path / "shared" / "data" / "postmortems.jsonl")
    assert corpus.default_path() == corpus.BUNDLED
    used = corpus.current()
    assert used.path == corpus.BUNDLED
    assert used.label == f"bench/data/incidents.jsonl ({len(used.docs)} summaries)"
    assert len(used.docs) >= 80
    assert len({p.organisation for p in used.docs}) >= 40  # varied, not one company's
    assert len({w for p in used.docs for w in bq.tokens(p.summary)}) >= 900
    assert [p.id for p in bq.postmortems()] == [p.id for p in used.docs]


def test_the_shared_summaries_are_used_when_they_are_beside_the_project(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shared = _write(
        tmp_path / "postmortems.jsonl",
        [{"id": "pm-001", "organisation": "A", "summary": "the shared one", "url": "u"}],
    )
    monkeypatch.setattr(corpus, "SHARED", shared)
    assert corpus.default_path() == shared
    assert corpus.current().label == "../shared/data/postmortems.jsonl (1 summaries)"


def test_corpus_names_the_file_a_benchmark_runs_on_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path / "mine.jsonl",
        [
            {"id": "pm-002", "organisation": "A", "summary": "edge routers crashed on a rule"},
            {"id": "pm-020", "organisation": "B", "summary": "a slash blocked every URL"},
            {"id": "x-1", "organisation": "C", "summary": "no query asks for this one"},
        ],
    )
    assert be.main(["--models", "hashing", "--split", "all", "--json", "--corpus", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["corpus"] == f"{path} (3 summaries)"
    assert out["documents"] == 3
    assert out["queries"] == 2  # the labelled queries whose target the corpus holds
    assert be.main(["--models", "hashing", "--split", "all", "--corpus", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"corpus {path} (3 summaries), split all")


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('{"id": "a", "organisation": "A"}\n', ":1: missing field 'summary'"),
        ('{"id": "a", "organisation": "A", "summary": "s"}\nnot json\n', ":2: not a JSON object"),
        ("\n", ": the corpus holds no summaries"),
    ],
)
def test_a_bad_corpus_is_refused_with_its_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], lines: str, message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(lines)
    with pytest.raises(SystemExit) as exit_:
        bq.main(["--corpus", str(path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"{path}{message}" in err
    assert "Traceback" not in err


def test_a_missing_corpus_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        be.main(["--models", "hashing", "--corpus", str(tmp_path / "nowhere.jsonl")])
    assert exit_.value.code == 2
    assert f"{tmp_path / 'nowhere.jsonl'}: cannot read the corpus" in capsys.readouterr().err
