"""The dense channel's embedders: the hashing one (the suite's) and real all-MiniLM-L6-v2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import recall
from predicates.errors import InputError

REPO = Path(__file__).resolve().parents[2]

INCIDENTS = [
    "database connection pool exhausted under load",
    "connection pools were exhausted on the primary database",
    "TLS certificate expired on the load balancer",
    "expired certificates broke TLS handshakes",
    "DNS resolution failed after a bad config push",
    "timeouts talking to the payments service",
    "the payment service kept timing out",
]


def _run(code: str, env: dict[str, str] | None = None) -> str:
    """``code`` in a fresh interpreter at the repository root (under ``env``, default
    this process's); its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=dict(os.environ) if env is None else env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# --- hashing -----------------------------------------------------------------------


def test_hashing_is_the_same_in_another_process_with_another_hash_seed() -> None:
    here = recall.HashingEmbedder().embed(INCIDENTS)
    code = (
        "import json, recall; "
        f"print(json.dumps(recall.HashingEmbedder().embed({INCIDENTS!r}).tolist()))"
    )
    for seed in ("1", "4242"):
        there = json.loads(_run(code, {**os.environ, "PYTHONHASHSEED": seed}))
        assert np.array_equal(here, np.asarray(there, dtype=np.float32))


def test_hashing_rows_are_unit_float32_of_the_declared_dimension() -> None:
    for dim in (384, 64):
        e = recall.HashingEmbedder(dim)
        assert e.name == f"hashing-v1-{dim}"
        v = e.embed([*INCIDENTS, "", "   ", "the of and", "!!!"])
        assert v.dtype == np.float32
        assert v.shape == (len(INCIDENTS) + 4, dim)
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_a_text_without_words_maps_to_one_fixed_unit_vector() -> None:
    e = recall.HashingEmbedder()
    empty, blank, punct, words = e.embed(["", "  \n", "!?-", "disk full"])
    assert np.array_equal(empty, blank)
    assert np.array_equal(empty, punct)
    assert abs(float(empty @ words)) < 0.5


def test_empty_input_has_shape_zero_by_dimension() -> None:
    assert recall.HashingEmbedder().embed([]).shape == (0, 384)
    assert recall.HashingEmbedder(32).embed(()).dtype == np.float32
    assert recall.MiniLMEmbedder().embed([]).shape == (0, 384)  # loads no model


def test_hashing_scores_texts_sharing_words_above_unrelated_ones() -> None:
    v = recall.HashingEmbedder().embed(INCIDENTS)
    sim = v @ v.T
    pool, pool2, tls, tls2, dns, payments, payments2 = range(7)
    for a, b in ((pool, pool2), (tls, tls2), (payments, payments2)):
        assert sim[a, b] > 0.3
        for other in range(len(INCIDENTS)):
            if other not in (a, b):
                assert sim[a, b] > sim[a, other] + 0.2
    assert abs(sim[pool, dns]) < 0.2
    assert abs(sim[tls, payments]) < 0.2


def test_hashing_stems_plurals_and_verb_endings_together() -> None:
    v = recall.HashingEmbedder().embed(
        ["timeouts", "timeout", "crashed", "crashing", "crashes", "caches", "cache"]
    )
    assert float(v[0] @ v[1]) == pytest.approx(1.0, abs=1e-5)
    assert float(v[2] @ v[3]) == pytest.approx(1.0, abs=1e-5)
    assert float(v[3] @ v[4]) == pytest.approx(1.0, abs=1e-5)
    assert float(v[5] @ v[6]) == pytest.approx(1.0, abs=1e-5)


# --- by name -----------------------------------------------------------------------


def test_make_embedder_maps_names_to_embedders() -> None:
    assert isinstance(recall.make_embedder("minilm"), recall.OnnxMiniLMEmbedder)
    assert isinstance(recall.make_embedder("all-minilm-l6-v2"), recall.OnnxMiniLMEmbedder)
    assert isinstance(recall.make_embedder("minilm-torch"), recall.MiniLMEmbedder)
    hashing = recall.make_embedder("hashing")
    assert isinstance(hashing, recall.HashingEmbedder)
    assert (hashing.name, hashing.dimension) == ("hashing-v1-384", 384)
    assert recall.make_embedder("none") is None
    minilm = recall.make_embedder("MiniLM")
    assert minilm is not None
    assert (minilm.name, minilm.dimension) == ("all-minilm-l6-v2", 384)


def test_make_embedder_refuses_an_unknown_name_listing_the_accepted_ones() -> None:
    with pytest.raises(InputError) as caught:
        recall.make_embedder("openai")
    message = str(caught.value)
    for name in ("minilm", "all-minilm-l6-v2", "hashing", "none", "'openai'"):
        assert name in message
    assert caught.value.code == "invalid_input"
    assert caught.value.detail["accepted"] == [
        "minilm",
        "all-minilm-l6-v2",
        "minilm-torch",
        "hashing",
        "none",
    ]


def test_importing_recall_imports_no_torch() -> None:
    out = _run(
        "import sys, recall; recall.make_embedder('minilm'); recall.tokenizer_path(); "
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'onnxruntime') "
        "if m in sys.modules))"
    )
    assert out.strip() == "[]"


def test_the_tokenizer_ships_in_the_model_package() -> None:
    path = recall.tokenizer_path()
    assert path.name == "tokenizer.json"
    assert path.is_file()
    from tokenizers import Tokenizer

    assert Tokenizer.from_file(str(path)).encode("connection pool exhausted").ids


# --- the real all-MiniLM-L6-v2 (loads torch) ----------------------------------------


@pytest.fixture(scope="module")
def minilm() -> recall.MiniLMEmbedder:
    return recall.MiniLMEmbedder(batch_size=4)


def test_minilm_rows_are_unit_384_float32(minilm: recall.MiniLMEmbedder) -> None:
    v = minilm.embed(INCIDENTS)
    assert v.shape == (len(INCIDENTS), 384)
    assert v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_minilm_puts_a_paraphrase_closer_than_an_unrelated_text(
    minilm: recall.MiniLMEmbedder,
) -> None:
    # no shared content word between the paraphrases: the hashing embedder cannot do this
    v = minilm.embed(
        [
            "the database ran out of connections",
            "postgres refused new clients because its pool was full",
            "a certificate expired on the load balancer",
        ]
    )
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.1


def test_minilm_loads_and_embeds_with_the_network_unreachable() -> None:
    # stricter than HF_HUB_OFFLINE=1: without it, proxies dead, and no socket opened at all
    dead = "http://127.0.0.1:9"
    code = (
        "import sys, json\n"
        "seen = []\n"
        "sys.addaudithook(lambda e, a: seen.append(e) if e in "
        "('socket.connect', 'socket.getaddrinfo') else None)\n"
        "import recall\n"
        "v = recall.MiniLMEmbedder().embed(['disk full on the build host'])\n"
        "print(json.dumps({'shape': list(v.shape), 'net': seen}))\n"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "NO_PROXY")}
    base |= {"HTTPS_PROXY": dead, "HTTP_PROXY": dead, "https_proxy": dead, "http_proxy": dead}
    out = json.loads(_run(code, base).strip().splitlines()[-1])
    assert out == {"shape": [1, 384], "net": []}
