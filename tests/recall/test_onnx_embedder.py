"""all-MiniLM-L6-v2 through ONNX Runtime (the default ``minilm``): the same vectors as
the model on PyTorch, a graph exported once per cache directory and then served without
torch, and an LRU cache of single texts."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import recall
from tests.recall.test_embedders import INCIDENTS, _run

TEXTS = [
    *INCIDENTS,
    "x",
    "Zertifikat abgelaufen: TLS-Handshake schlägt fehl 🔒",
    # past the model's 256 tokens: both truncate the same way
    " ".join(["connection pool exhausted after the deploy of payment-api"] * 60),
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    return tmp_path_factory.mktemp("onnx")


@pytest.fixture(scope="module")
def onnx(cache_dir: pathlib.Path) -> recall.OnnxMiniLMEmbedder:
    embedder = recall.OnnxMiniLMEmbedder(cache_dir, batch_size=3)
    embedder.embed(["warm up"])
    return embedder


def test_the_first_use_exports_the_graph_into_the_cache(
    onnx: recall.OnnxMiniLMEmbedder, cache_dir: pathlib.Path
) -> None:
    assert onnx.exported
    assert (cache_dir / "all-minilm-l6-v2.onnx").stat().st_size > 10_000_000
    assert [p.name for p in cache_dir.iterdir()] == ["all-minilm-l6-v2.onnx"]  # no temp left


def test_onnx_gives_the_vectors_of_the_model_on_pytorch(onnx: recall.OnnxMiniLMEmbedder) -> None:
    """The same model: every row within 1e-5 of sentence-transformers' (so both store
    under one model name), batched in threes and one by one alike."""
    torch_rows = recall.MiniLMEmbedder(batch_size=4).embed(TEXTS)
    rows = onnx.embed(TEXTS)
    assert rows.shape == (len(TEXTS), 384) and rows.dtype == np.float32
    assert np.abs(rows - torch_rows).max() < 1e-5
    alone = np.vstack([onnx.embed([t]) for t in TEXTS])
    assert np.abs(alone - torch_rows).max() < 1e-5
    assert onnx.name == recall.MiniLMEmbedder.name and onnx.dimension == 384


def test_a_cached_graph_is_served_without_torch(cache_dir: pathlib.Path, onnx: object) -> None:
    code = (
        "import sys, json, pathlib, recall\n"
        f"e = recall.OnnxMiniLMEmbedder(pathlib.Path({str(cache_dir)!r}))\n"
        "v = e.embed(['disk full on the build host'])\n"
        "mods = sorted(m for m in ('torch', 'transformers', 'sentence_transformers') "
        "if m in sys.modules)\n"
        "print(json.dumps({'shape': list(v.shape), 'exported': e.exported, 'mods': mods}))\n"
    )
    out = json.loads(_run(code).strip().splitlines()[-1])
    assert out == {"shape": [1, 384], "exported": False, "mods": []}


def test_a_damaged_cache_is_exported_again(tmp_path: pathlib.Path) -> None:
    (tmp_path / "all-minilm-l6-v2.onnx").write_bytes(b"not a graph")
    embedder = recall.OnnxMiniLMEmbedder(tmp_path)
    row = embedder.embed(["the database ran out of connections"])
    assert embedder.exported and row.shape == (1, 384)
    assert np.linalg.norm(row) == pytest.approx(1.0, abs=1e-5)


def test_a_repeated_query_comes_from_the_cache_as_a_copy(cache_dir: pathlib.Path) -> None:
    embedder = recall.OnnxMiniLMEmbedder(cache_dir, query_cache=2)
    first = embedder.embed(["pool exhausted"])
    first[0, :] = 0.0  # the caller's copy: the cache keeps its own
    again = embedder.embed(["pool exhausted"])
    assert embedder.cache.cache_info().hits == 1 and np.linalg.norm(again) == pytest.approx(
        1.0, abs=1e-5
    )
    embedder.embed(["disk full"])
    embedder.embed(["dns failure"])  # evicts the least recently used: "pool exhausted"
    embedder.embed(["pool exhausted"])
    assert embedder.cache.cache_info().hits == 1
    embedder.embed(["dns failure"])
    assert embedder.cache.cache_info().hits == 2
    embedder.embed(["pool exhausted", "disk full"])  # a batch bypasses the cache
    assert embedder.cache.cache_info().hits == 2


def test_bad_settings_are_input_errors() -> None:
    from predicates.errors import InputError

    with pytest.raises(InputError):
        recall.OnnxMiniLMEmbedder(threads=0)
    with pytest.raises(InputError):
        recall.OnnxMiniLMEmbedder(batch_size=0)
