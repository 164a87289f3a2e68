"""The package's one sentence splitter: what a user quoting a sentence from their notes sees."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from pathlib import Path

import pytest

from chatbot.text.sentences import is_heading, sentence_spans, split_sentences

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "corpus").glob("*.md"))


@pytest.mark.parametrize(
    "text",
    [
        "The classifier was evaluated by Dr. Smith at the U.S. office. Results were strong.",
        "As shown in Fig. 3, the loss falls quickly. Smith et al. report a similar gain.",
        "The bound follows from Eq. 2 and the triangle inequality. See Sec. 4.1 for the proof.",
        "Some baselines, e.g. BERT, were tuned, i.e. twice. This is known (Chen et al., 2020).",
    ],
)
def test_abbreviations_do_not_end_a_sentence(text: str) -> None:
    got = split_sentences(text)
    assert len(got) == 2, f"an abbreviation split a sentence in two: {got}"
    assert got[1][0].isupper(), f"the second sentence starts mid-clause: {got}"


def test_a_figure_does_not_split() -> None:
    text = "Accuracy rose by 3.5% to 71.3 with v1.0. It costs $1.2M for 0.5 mm of wire."
    assert split_sentences(text) == [
        "Accuracy rose by 3.5% to 71.3 with v1.0.",
        "It costs $1.2M for 0.5 mm of wire.",
    ]


def test_headings_front_matter_and_markers_are_never_sentences() -> None:
    text = (
        "---\ntitle: My notes\n---\n\n# My notes\n\n## Results\nThe model beat the baseline. "
        "It was faster.\n\nMethod\n------\n\n- It needs no GPU.\n- It is small\n\n**Key point**\n"
        "> A reviewer asked for more baselines.\n"
    )
    assert split_sentences(text) == [
        "The model beat the baseline.",
        "It was faster.",
        "It needs no GPU.",
        "It is small",
        "A reviewer asked for more baselines.",
    ]


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_no_corpus_sentence_contains_front_matter_or_a_heading(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    got = split_sentences(text)
    assert got, f"{path.name}: no sentences found"
    for sentence in got:
        assert "---" not in sentence and "title:" not in sentence, f"front matter: {sentence!r}"
        assert not sentence.startswith("#"), f"a heading quoted as a sentence: {sentence!r}"


def test_spans_index_the_original_text_exactly() -> None:
    text = "# Title\r\n\r\n  First line\nwraps here.  “Quoted.” Ünïcode — fine…\n\n* Last one  "
    spans = sentence_spans(text)
    got = [text[a:b] for a, b in spans]
    assert got == ["First line\nwraps here.", "“Quoted.”", "Ünïcode — fine…", "Last one"], got
    assert all(a < b <= c for (a, b), (c, _) in pairwise(spans)), "spans overlap or go back"
    assert split_sentences(text) == got


@pytest.mark.parametrize(
    "text", ["", "   \n\n ", "# Only a heading\n\n---\n", "...", "```\ncode.\n```"]
)
def test_nothing_to_quote_gives_an_empty_list(text: str) -> None:
    assert split_sentences(text) == [], f"{text!r} has no sentence"


def test_is_heading() -> None:
    assert is_heading("## Results") and is_heading("# Title") and is_heading("---")
    assert is_heading("**Key findings**") and is_heading("| a | b |")
    assert not is_heading("#hashtag in a sentence.") and not is_heading("Results were good.")


def test_the_labelled_set_is_split_well() -> None:
    """The benchmark's hand-labelled texts: the chosen splitter gets at least 95% of sentences."""
    rows = [json.loads(line) for line in (ROOT / "benchmarks/data/sentences.jsonl").open()]
    want = sum(len(row["sentences"]) for row in rows)
    right = sum(len(set(split_sentences(row["text"])) & set(row["sentences"])) for row in rows)
    assert right >= 0.95 * want, f"only {right} of {want} labelled sentences found exactly"


def test_thread_safe_and_deterministic() -> None:
    texts = [p.read_text(encoding="utf-8") for p in CORPUS]
    once = [split_sentences(t) for t in texts]
    with ThreadPoolExecutor(4) as pool:
        again = list(pool.map(split_sentences, texts * 3))
    assert again == once * 3, "splitting the same text in threads gave different sentences"
