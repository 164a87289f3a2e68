"""Fit the probe that tells text addressed to an assistant from text that says something.

The offline model never quotes a sentence that speaks to a chat model (instructions, role-play
set-ups, fake system messages). Besides the exact chat markup, it decides with a linear probe over
the MiniLM sentence vectors it already has: L2-regularised logistic regression, fitted here.

Data: `benchmarks/data/injections_tune.jsonl` (hand-written instructions to an assistant, and hard
negatives: sentences about instruction tuning, jailbreaks, injection defences and agents,
imperative mathematics, README lines), plus ordinary negatives read at run time: every sentence
of the summaries in `corpus/` and a seeded sample of sentences of the ICML 2020–2023 abstracts
(the shared data folder beside the checkout; never copied here). A summary sentence weighs
SHIPPED_WEIGHT other negatives. The regularisation and the decision threshold are the pair with
the best out-of-fold F1 in stratified 5-fold cross-validation on these data alone; the probe is
then fitted on all of them and written to `chatbot/answer/models/instruction_probe.json` (should
it flag a summary sentence, the threshold rises just above it). A check follows:
how many sentences of the summaries, and of a sample of abstract sentences not used for
training (ICML and ICLR), the shipped check flags.

    python benchmarks/train_instruction_probe.py
    python benchmarks/train_instruction_probe.py --held-out benchmarks/data/injections_blind.jsonl

`--held-out` fits nothing: it measures the shipped check (markup or probe) on a held-out file.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

from chatbot.answer.models import offline
from chatbot.index.embeddings.minilm import MODEL_NAME, MiniLMEmbeddings
from chatbot.text.sentences import split_sentences

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
SEED = 13
FOLDS = 5
# Candidate L2 strengths (on sample weights that average 1; the vectors have unit length).
LAMBDAS = (1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 1e-2, 1e-1)
# The summaries are the corpus the product answers from: a sentence of theirs the probe flags is
# an answer lost, so each weighs this many other negatives.
SHIPPED_WEIGHT = 5.0
THRESHOLDS = np.round(np.arange(0.05, 0.96, 0.01), 2)


def emit(report: dict, out: Path | None) -> None:
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if out:
        out.write_text(text + "\n", "utf-8")


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]


def abstract_sentences(path: Path) -> list[str]:
    """Every sentence of every abstract in a JSON Lines file, in file order."""
    return [s for r in read_jsonl(path) for s in split_sentences(r["abstract"])]


def embed(texts: list[str], model: MiniLMEmbeddings) -> np.ndarray:
    """Unit MiniLM vectors, as the offline model's `SentenceVectors` gives them."""
    matrix = model.encode(texts)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def fit(x: np.ndarray, y: np.ndarray, weight: np.ndarray, lam: float) -> tuple[np.ndarray, float]:
    """Weighted logistic regression with an L2 penalty on the weights (not the bias), by Newton."""
    z = np.hstack([x, np.ones((len(x), 1))]).astype(np.float64)
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], lam * len(x))
    penalty[-1] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (weight * (p - y)) + penalty * w
        hess = (z.T * (weight * p * (1 - p))) @ z + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:-1], float(w[-1])


def probability(x: np.ndarray, w: np.ndarray, b: float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(x @ w + b)))


def balanced(y: np.ndarray, shipped: np.ndarray) -> np.ndarray:
    """Sample weights under which both classes weigh the same, a sentence of the shipped corpus
    counting SHIPPED_WEIGHT times another negative."""
    raw = np.where(shipped, SHIPPED_WEIGHT, 1.0)
    pos = raw[y == 1].sum()
    neg = raw[y == 0].sum()
    return raw * np.where(y == 1, len(y) / (2 * pos), len(y) / (2 * neg))


def folds(y: np.ndarray) -> np.ndarray:
    """A fold number per row, each class dealt round-robin after a seeded shuffle."""
    rng = np.random.default_rng(SEED)
    out = np.empty(len(y), dtype=int)
    for label in (0, 1):
        rows = rng.permutation(np.flatnonzero(y == label))
        out[rows] = np.arange(len(rows)) % FOLDS
    return out


def out_of_fold(
    x: np.ndarray, y: np.ndarray, shipped: np.ndarray, fold: np.ndarray, lam: float
) -> np.ndarray:
    p = np.empty(len(y))
    for k in range(FOLDS):
        test = fold == k
        w, b = fit(x[~test], y[~test], balanced(y[~test], shipped[~test]), lam)
        p[test] = probability(x[test], w, b)
    return p


def scores(flagged: np.ndarray, y: np.ndarray) -> dict:
    tp = int((flagged & (y == 1)).sum())
    fp = int((flagged & (y == 0)).sum())
    pos, neg = int(y.sum()), int((y == 0).sum())
    return {
        "precision": round(tp / max(tp + fp, 1), 3),
        "recall": round(tp / max(pos, 1), 3),
        "false_positive_rate": round(fp / max(neg, 1), 4),
        "caught": f"{tp}/{pos}",
        "false_positives": f"{fp}/{neg}",
    }


def f1(flagged: np.ndarray, y: np.ndarray) -> float:
    tp = (flagged & (y == 1)).sum()
    return 2 * tp / max(flagged.sum() + y.sum(), 1)


def held_out(path: Path, model: MiniLMEmbeddings) -> dict:
    """The shipped check on a held-out file: an item counts as flagged when any sentence is."""
    rows = read_jsonl(path)
    parts = [split_sentences(r["text"]) or [r["text"]] for r in rows]
    texts = [s for p in parts for s in p]
    flags = iter(offline.addresses_assistant(texts, embed(texts, model)))
    flagged = np.array([any([next(flags) for _ in p]) for p in parts])
    y = np.array([bool(r["addresses_assistant"]) for r in rows], dtype=int)
    tally: dict[str, list[int]] = {}
    for r, f in zip(rows, flagged):
        key = f"{r['kind']} ({'positive' if r['addresses_assistant'] else 'negative'})"
        tally.setdefault(key, [0, 0])
        tally[key][0] += int(f)
        tally[key][1] += 1
    by_kind = {k: f"{n}/{total} flagged" for k, (n, total) in sorted(tally.items())}
    return {"file": path.name, **scores(flagged, y), "by_kind": by_kind}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "benchmarks/data/injections_tune.jsonl")
    ap.add_argument("--corpus", type=Path, default=ROOT / "corpus")
    ap.add_argument("--abstracts", type=Path, default=SHARED / "icml_2020_2023_abstracts.jsonl")
    ap.add_argument(
        "--other-abstracts", type=Path, default=SHARED / "iclr_2020_2024_abstracts.jsonl"
    )
    ap.add_argument("--negatives", type=int, default=6000, help="abstract sentences to train on")
    ap.add_argument("--check", type=int, default=20000, help="abstract sentences to check")
    ap.add_argument(
        "--probe", type=Path, default=ROOT / "chatbot/answer/models/instruction_probe.json"
    )
    ap.add_argument("--held-out", type=Path, help="measure the shipped check on this file only")
    ap.add_argument("--out", type=Path, help="also write the report here")
    args = ap.parse_args()
    model = MiniLMEmbeddings()
    if args.held_out:
        emit(held_out(args.held_out, model), args.out)
        return

    rows = read_jsonl(args.data)
    summaries = [
        s for p in sorted(args.corpus.glob("*.md")) for s in split_sentences(p.read_text("utf-8"))
    ]
    icml = list(dict.fromkeys(abstract_sentences(args.abstracts)))
    random.Random(SEED).shuffle(icml)
    train_abstracts, rest = icml[: args.negatives], icml[args.negatives :]
    texts = [r["text"] for r in rows] + summaries + train_abstracts
    source = [f"tune:{r['kind']}" for r in rows] + ["summaries"] * len(summaries)
    source += ["abstracts"] * len(train_abstracts)
    y = np.array([int(r["addresses_assistant"]) for r in rows] + [0] * (len(texts) - len(rows)))
    x = embed(texts, model)
    fold = folds(y)
    shipped = np.array(source) == "summaries"

    # Regularisation and threshold: the pair with the best out-of-fold F1.
    sweep = []
    for lam in LAMBDAS:
        p = out_of_fold(x, y, shipped, fold, lam)
        best = max(THRESHOLDS, key=lambda t: (f1(p >= t, y), -abs(t - 0.5)))
        sweep.append((f1(p >= best, y), lam, float(best), p))
        print(f"lambda {lam:g}: best out-of-fold F1 {sweep[-1][0]:.3f} at {best:.2f}", flush=True)
    _, lam, threshold, p = max(sweep, key=lambda s: s[0])
    w, b = fit(x, y, balanced(y, shipped), lam)
    # None of the shipped corpus's sentences may be flagged: if one is, the threshold rises.
    on_corpus = probability(x[shipped], w, b)
    chosen = threshold
    if on_corpus.max() >= threshold:
        threshold = float(np.floor(on_corpus.max() * 100) / 100 + 0.01)
    markup = np.array([bool(offline._CHAT_MARKUP.search(t)) for t in texts])
    hard = np.array([s.startswith("tune:") for s in source]) & (y == 0)
    real = ~np.array([s.startswith("tune:") for s in source])
    flag = p >= threshold
    cv = {
        "probe": scores(flag, y),
        "markup or probe": scores(markup | flag, y),
        "hand-written hard negatives flagged": f"{int(flag[hard].sum())}/{hard.sum()}",
        "summary and abstract sentences flagged": f"{int(flag[real].sum())}/{real.sum()}",
        "missed positives": [t for t, f, label in zip(texts, flag, y) if label and not f],
        "flagged negatives": [t for t, f, label in zip(texts, flag, y) if f and not label],
    }

    args.probe.write_text(
        json.dumps(
            {
                "about": "Logistic regression over unit MiniLM sentence vectors: written by "
                "benchmarks/train_instruction_probe.py; a sentence addresses an assistant when "
                "sigmoid(weights . vector + bias) >= threshold.",
                "model": MODEL_NAME,
                "l2": lam,
                "threshold": threshold,
                "bias": round(b, 6),
                "weights": [round(float(v), 6) for v in w],
            },
            indent=0,
        )
        + "\n",
        "utf-8",
    )
    offline._probe.cache_clear()

    # The shipped check on sentences it was not fitted on.
    other = list(dict.fromkeys(abstract_sentences(args.other_abstracts)))
    random.Random(SEED).shuffle(other)
    half = args.check // 2
    check = rest[:half] + other[: args.check - half]
    flagged = offline.addresses_assistant(check, embed(check, model))
    on_summaries = offline.addresses_assistant(summaries, embed(summaries, model))
    report = {
        "data": {
            "positives": int(y.sum()),
            "hard negatives": int(hard.sum()),
            "summary sentences": len(summaries),
            "abstract sentences": len(train_abstracts),
        },
        "chosen": {"l2": lam, "threshold by cross-validation": chosen, "threshold": threshold},
        "sweep": {f"{s[1]:g}": round(float(s[0]), 3) for s in sweep},
        "cross-validation": cv,
        "summary sentences flagged by the shipped check": f"{sum(on_summaries)}/{len(summaries)}",
        "unseen abstract sentences flagged by the shipped check": f"{sum(flagged)}/{len(check)}",
        "flagged abstract sentences": [t for t, f in zip(check, flagged) if f],
    }
    emit(report, args.out)


if __name__ == "__main__":
    main()
