"""Regenerate minilm_reference.json: all-MiniLM-L6-v2 vectors computed by sentence-transformers.

The project embeds with a NumPy re-implementation (chatbot/index/embeddings/minilm.py); these
vectors are the ground truth it is tested against.
torch and sentence-transformers are deliberately NOT project
dependencies, so run this in a throwaway venv (install torch first so pip doesn't pull a CUDA
build):

    python3 -m venv /tmp/stvenv
    /tmp/stvenv/bin/pip install torch==2.13.0
    /tmp/stvenv/bin/pip install sentence-transformers
    MODEL_DIR="$(.venv/bin/python -c \
        'from chatbot.index.embeddings.minilm import default_model_dir as d; print(d())')"
    /tmp/stvenv/bin/python tests/data/make_minilm_reference.py "$MODEL_DIR"

It overwrites tests/data/minilm_reference.json (next to this script).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import sentence_transformers
import torch
from sentence_transformers import SentenceTransformer

OUT = Path(__file__).with_name("minilm_reference.json")

# Long enough (> 256 word pieces) that the reference exercises truncation at max_seq_length.
LONG = " ".join(
    [
        "Large language models are trained on web-scale corpora with next-token prediction,",
        "and their downstream behaviour depends on data mixture, tokenizer, and optimiser choices.",
    ]
    * 12
)

SENTENCES = [
    "What is the main contribution of this paper?",
    "Diffusion models generate images by iteratively denoising Gaussian noise.",
    LONG,
    "Wait... what?! (See Sec. 3.2; Eq. [7]) -- really: 100% sure? #ICML2025 @author",
    "The “curly quotes” café, naïve résumé — Straße, 東京 and an emoji 🚀.",
    "a",
    "",
    "   GRADIENT descent   converges\tquickly\n on Convex problems  ",
    "Let f(x) = x^2 + 3x − 1; then ∇f(x) = 2x + 3 and ‖θ‖₂ ≤ 1.",
    (
        "We study offline reinforcement learning with function approximation and show that "
        "pessimism in the face of uncertainty yields sample-efficient policies, with regret "
        "bounds that depend only on the coverage of the optimal policy."
    ),
]


def main() -> None:
    """Embed SENTENCES with sentence-transformers and write them, rounded, to OUT."""
    model_dir = sys.argv[1] if len(sys.argv) > 1 else None
    if not model_dir:
        sys.exit(__doc__)
    model = SentenceTransformer(model_dir, device="cpu")
    n_tokens = len(model.tokenizer(LONG)["input_ids"])
    assert n_tokens > model.max_seq_length, (n_tokens, model.max_seq_length)
    vectors = model.encode(SENTENCES, convert_to_numpy=True, normalize_embeddings=False)
    data = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "generated_with": {
            "sentence_transformers": sentence_transformers.__version__,
            "torch": torch.__version__,
            "max_seq_length": model.max_seq_length,
        },
        "sentences": SENTENCES,
        "vectors": [[round(float(v), 7) for v in row] for row in vectors],
    }
    # One vector per line keeps the file reviewable and its diffs readable.
    text = json.dumps({**data, "vectors": "@VECTORS@"}, ensure_ascii=False, indent=1)
    rows = ",\n  ".join(json.dumps(row) for row in data["vectors"])
    text = text.replace('"@VECTORS@"', "[\n  " + rows + "\n ]")
    OUT.write_text(text + "\n", encoding="utf-8")
    print(f"wrote {len(SENTENCES)} vectors of dim {vectors.shape[1]} to {OUT}")


if __name__ == "__main__":
    main()
