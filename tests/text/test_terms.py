"""A question's words read against the passages: slips of the keyboard respelled, nothing else."""

from __future__ import annotations

from chatbot.index.embeddings.minilm import vocabulary_words
from chatbot.text.terms import one_slip, respell

PASSAGE_WORDS = {"transport": 3, "optimal": 2, "models": 4, "papers": 1, "match": 2, "agent": 2}


def test_each_kind_of_slip_is_one_slip() -> None:
    assert one_slip("transprt", "transport")  # a letter dropped
    assert one_slip("modells", "models")  # a letter added
    assert one_slip("modols", "models")  # a letter changed
    assert one_slip("modles", "models")  # two neighbours swapped
    assert not one_slip("mdoles", "models") and not one_slip("models", "models")


def test_a_slip_is_read_as_the_passage_word_it_is_one_slip_from() -> None:
    slipped = "Which paprs use optimal transprt for modles?"
    assert respell(slipped, PASSAGE_WORDS) == "Which papers use optimal transport for models?"


def test_real_words_other_forms_and_short_words_are_left_as_asked() -> None:
    real = vocabulary_words()
    assert "batch" in real and "transprt" not in real
    # "batch" is one slip from the passages' "match" but a word of its own; "agents" is a form
    # of "agent"; "agnt" is too short to tell from the many words one slip away.
    assert respell("batch agents agnt", PASSAGE_WORDS, real) == "batch agents agnt"
