"""Evidence in the API: each citation quotes the passage sentence(s) backing the answer, with
their offsets in the passage text, and answers number their citations 1..m in order of first use."""

from __future__ import annotations

import json
import re

from chatbot.answer.citations import clean_stream
from chatbot.chatbot import Chatbot
from chatbot.text.markers import cited
from tests.answer.test_llm import QUESTION, fake, real, server  # noqa: F401  (the fake server's fixtures)
from tests.helpers import run_cli

# Offline answers that cite one passage, several passages, and (in prompt order) a gap: on
# "language models" the offline model cites prompt passages 1-4 and 6.
QUESTIONS = [
    "What is the final boss of spoken language modeling?",
    "What is Algorithmic Collective Action?",
    "How do diffusion models work?",
    "Which papers are about language models?",
    "Which papers study reinforcement learning?",
]


# The offline model ends each sentence it quotes with the sentence's marker(s).
_AFTER_MARKERS = re.compile(r"(?<=\])\.?\s+(?=[A-Z“\"(])")
_MARKERS = re.compile(r"\s*\[\d+\]")


def words(text: str) -> str:
    return " ".join(text.split())


def check_spans(citation) -> None:
    """The quote is the passage text at its spans, piece by piece, joined by spaces."""
    assert citation.quote, f"[{citation.n}] {citation.doc_id} should quote its passage"
    pieces = [citation.text[a:b] for a, b in citation.spans]
    assert all(pieces), f"[{citation.n}] spans should be non-empty: {citation.spans}"
    assert " ".join(pieces) == citation.quote, f"[{citation.n}] quote is not at its spans"
    assert list(citation.spans) == sorted(citation.spans), "spans are in passage order"


def check_numbering(text: str, citations) -> None:
    numbers = cited(text)
    assert numbers == list(range(1, len(numbers) + 1)), f"numbers not consecutive: {text}"
    assert [c.n for c in citations] == numbers, "citations should match the text's numbers"


def test_offline_quotes_are_the_answers_own_sentences_found_in_the_passage(bot):
    for question in QUESTIONS:
        answer = bot.ask(question)
        assert answer.citations, f"{question!r} should be answered with citations"
        for c in answer.citations:
            check_spans(c)
            claims = [
                words(_MARKERS.sub("", s)).rstrip(".")
                for s in _AFTER_MARKERS.split(answer.text)
                if c.n in cited(s)
            ]
            assert claims, f"[{c.n}] should be cited by a sentence of {answer.text!r}"
            for claim in claims:
                assert claim in words(c.quote), f"[{c.n}] quote {c.quote!r} lacks {claim!r}"


def test_numbers_are_consecutive_in_order_of_first_use_also_while_streaming(bot):
    gaps = 0
    for question in QUESTIONS:
        stream = bot.stream(question)
        shown = list(stream.passages)
        text = ""
        for piece in stream:
            text += piece
            for n in cited(text):
                assert n in stream.numbers.values(), f"[{n}] streamed without a source: {text}"
        answer = stream.answer
        assert text.strip() == answer.text, "the streamed pieces are the answer's text"
        check_numbering(text, answer.citations)
        back = {n: prompt_n for prompt_n, n in stream.numbers.items()}
        for c in answer.citations:
            assert c.doc_id == shown[back[c.n] - 1].doc_id, f"[{c.n}] leads to the wrong passage"
        gaps += list(stream.numbers) != sorted(stream.numbers.values())
    assert gaps, "some question should cite prompt passages out of order or with a gap"


def test_renumbering_in_a_stream_keeps_repeats_and_split_markers():
    numbers: dict[int, int] = {}
    pieces = ["A [", "2][5", "]. B [5]. C [3", ", 9]. D [2]."]
    out = "".join(clean_stream(pieces, {1, 2, 3, 4, 5}, numbers))
    assert out == "A [1][2]. B [2]. C [3]. D [1].", out
    assert numbers == {2: 1, 5: 2, 3: 3}


def test_sources_are_known_before_the_first_piece(bot):
    stream = bot.stream(QUESTIONS[0])
    assert stream.answer is None, "nothing has been read yet"
    assert stream.passages, "the passages shown to the model are known before the first piece"
    assert dict(stream.numbers) == {}, "no marker has streamed yet"
    answer = stream.result()
    assert list(stream.passages) == answer.passages


def test_a_real_models_citations_are_renumbered_and_quote_the_passage_it_paraphrases(
    fake,  # noqa: F811
    built_index,
):
    bot = Chatbot(real(built_index, fake.url))
    shown = bot.retrieve(QUESTION, k=5)
    second = _sentence_with_terms(shown[1].text)
    fifth = _sentence_with_terms(shown[4].text)
    # Paraphrases: the sentences' words reversed, without their own full stops.
    reply = f"{_reword(second)} [2]. Moreover, {_reword(fifth)} [5][2]."
    fake.script = [{"content": reply}]
    stream = bot.stream(QUESTION, k=5)
    assert [p.doc_id for p in stream.passages] == [p.doc_id for p in shown]
    answer = stream.result()
    assert answer.text.endswith("[1]. Moreover, " + f"{_reword(fifth)} [2][1]."), answer.text
    check_numbering(answer.text, answer.citations)
    assert [c.doc_id for c in answer.citations] == [shown[1].doc_id, shown[4].doc_id]
    for c, sentence in zip(answer.citations, (second, fifth), strict=True):
        check_spans(c)
        assert sentence in c.quote, f"[{c.n}] should quote {sentence!r}, got {c.quote!r}"


def _sentence_with_terms(text: str) -> str:
    """A sentence of `text` long enough to be told apart from the others."""
    from chatbot.text.sentences import split_sentences

    return max(split_sentences(text), key=lambda s: len(set(s.lower().split())))


def _reword(sentence: str) -> str:
    return " ".join(reversed(re.sub(r"[^\w\s-]", "", sentence).split()))


def test_ask_json_has_quote_and_spans(built_index):
    result = run_cli(built_index, "ask", QUESTIONS[0], "--json")
    assert result.returncode == 0, result.stderr
    first = json.loads(result.stdout)["citations"][0]
    start, end = first["spans"][0]
    assert first["quote"] and first["text"][start:end] in first["quote"], first
