"""The support check: claims against real summaries, and every answer's sentences against the
passages they cite (a real model through the OpenAI protocol, and the offline model)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from chatbot import Chatbot, Support, Unsupported
from chatbot.index.documents import read_document
from chatbot.verify import support
from tests.answer.test_llm import fake, real, server  # noqa: F401  (the fake server's fixtures)
from tests.conftest import CORPUS
from tests.helpers import run_cli


def summary(name: str) -> str:
    """A corpus summary as the index holds it: its title, then its text."""
    doc = read_document(CORPUS / name)
    return f"{doc.title}\n\n{doc.text}"


def words(text: str) -> str:
    return " ".join(text.split())


SOCIAL = "06-generative-social-choice.md"  # "Imagine a town hall meeting with 10,000 residents."
TRANSFORMERS = "02-transformers-associative-memory.md"  # "From LLMs like GPT-4 to vision models"
DIFFUSION = "08-masked-diffusion-token-order.md"  # "token by token, from left to right."

SUPPORTED = [
    (SOCIAL, "The summary pictures a town hall meeting with ten thousand residents."),
    (SOCIAL, "Letting every resident of a 10,000-person town hall speak is impossible."),
    (DIFFUSION, "Autoregressive models produce text one token at a time, from left to right."),
    (
        TRANSFORMERS,
        "From LLMs like GPT-4 to vision models, Attention is All You Need is everywhere.",
    ),
]
# What the lexical check catches without a model: a figure or a name the passage does not give.
# A reversed or invented conclusion needs understanding: CHATBOT_SUPPORT_CHECK=model.
UNSUPPORTED = [
    ("number", SOCIAL, "The summary pictures a town hall meeting with 5,000 residents."),
    ("number", SOCIAL, "Imagine a town hall meeting with 10,000 residents, 40% of them online."),
    ("entity", TRANSFORMERS, "From LLMs like Gemini to vision models, attention is everywhere."),
    ("entity", SOCIAL, "Researchers have turned to Meta's Llama models to solve this."),
]


@pytest.mark.parametrize(("name", "claim"), SUPPORTED)
def test_a_restated_claim_is_supported_with_the_sentence_that_says_it(bot, name, claim):
    passage = summary(name)
    result = bot.check_claim(claim, passage)
    assert isinstance(result, Support)
    assert result.supported, f"{claim!r} restates {name} but scored {result.score}"
    assert 0.0 <= result.score <= 1.0
    assert result.quote and words(result.quote) in words(passage), (
        f"the quote should be the passage's own sentence(s): {result.quote!r}"
    )


@pytest.mark.parametrize(("kind", "name", "claim"), UNSUPPORTED)
def test_a_changed_claim_is_not_supported(bot, kind, name, claim):
    result = bot.check_claim(claim, summary(name))
    assert not result.supported, f"{kind}: {claim!r} should not be supported ({result})"
    assert 0.0 <= result.score < support.THRESHOLD, result


def test_figures_match_however_they_are_written(bot):
    passage = (
        "Accuracy rose by 20% on the benchmark. The model has 7B parameters. "
        "The benchmark holds 10,000 questions."
    )
    for claim in (
        "Accuracy rose by twenty percent on the benchmark.",
        "Accuracy rose by 20 percent on the benchmark.",
        "The model has 7 billion parameters.",
        "The benchmark holds 10k questions.",
        "The benchmark holds 10\u202f000 questions.",
    ):
        assert bot.check_claim(claim, passage).supported, claim
    for claim in (
        "Accuracy rose by 30% on the benchmark.",
        "The model has 70B parameters.",
        "The benchmark holds 100k questions.",
    ):
        assert not bot.check_claim(claim, passage).supported, claim


def test_names_match_in_the_plural_and_with_a_word_hyphenated_to_them(bot):
    passage = "In the suite, an LLM solved every CTF puzzle. It found GPT-4o the strongest model."
    claim = "In the suite, LLMs solved every CTF-style puzzle."
    assert bot.check_claim(claim, passage).supported, claim
    for claim in (
        "In the suite, LLMs solved every Gemini-style puzzle.",
        "It found GPT-4V the strongest model.",
    ):
        assert not bot.check_claim(claim, passage).supported, claim


# -- every answer is checked ---------------------------------------------------------------------


QUESTION = "Why is it hard to hear everyone in a town hall meeting?"


def prompt_number(bot: Chatbot, phrase: str = "10,000 residents") -> int:
    """The number in the model's prompt of the retrieved passage containing `phrase`."""
    passages = bot.retrieve(QUESTION)
    found = [n for n, p in enumerate(passages, 1) if phrase in p.text]
    assert found, f"retrieval should find the passage with {phrase!r}"
    return found[0]


def ask_model(server, built_index, write: Callable[[int], str]):  # noqa: F811
    """The Answer when the model replies `write(n)`, n citing the town-hall passage."""
    bot = Chatbot(real(built_index, server.url))
    server.script = [{"content": write(prompt_number(bot))}]
    return bot.ask(QUESTION)


def test_a_sentence_whose_figure_differs_from_its_source_is_flagged(fake, built_index):  # noqa: F811
    answer = ask_model(
        fake,
        built_index,
        lambda n: (
            f"Imagine a town hall meeting with 20,000 residents [{n}]. "
            f"It is impossible to let everyone speak [{n}]. Paris is the capital of France."
        ),
    )
    reasons = {u.sentence: u for u in answer.unsupported}
    assert len(answer.unsupported) == 2, f"two sentences should be flagged: {answer.unsupported}"
    changed = next(u for u in answer.unsupported if "20,000" in u.sentence)
    assert changed.reason == "not_found" and changed.numbers == (1,), changed
    assert answer.text[changed.start : changed.end] == changed.sentence
    assert changed.score < support.THRESHOLD
    uncited = next(u for u in answer.unsupported if "Paris" in u.sentence)
    assert uncited.reason == "uncited" and uncited.numbers == (), uncited
    assert not any("impossible" in s for s in reasons), "the quoted sentence is supported"
    assert "check" in answer.timings
    shown = answer.to_dict()["unsupported"]
    assert [u["reason"] for u in shown] == [u.reason for u in answer.unsupported]


def test_markdown_answers_backed_by_their_sources_are_not_flagged(fake, built_index):  # noqa: F811
    answer = ask_model(
        fake,
        built_index,
        lambda n: (
            f"**In short:** researchers have turned to Large Language Models [{n}].\n\n"
            f"- A town hall meeting can have *10,000* residents [{n}].\n"
            f"- It is impossible to let *everyone* speak [{n}]."
        ),
    )
    assert answer.citations and answer.unsupported == (), answer.unsupported


def test_an_answer_citing_nothing_is_flagged_as_a_whole(fake, built_index):  # noqa: F811
    text = "A town hall meeting cannot give every one of its residents a turn to speak."
    fake.script = [{"content": text}]
    answer = Chatbot(real(built_index, fake.url)).ask(QUESTION)
    assert answer.unsupported == (Unsupported(text, 0, len(text), "uncited", (), 0.0),)


def test_offline_answers_quote_their_sources_so_nothing_is_flagged(bot):
    for question in (
        QUESTION,
        "What is Algorithmic Collective Action?",
        "Which papers are about language models?",
        "Which theory links Transformers to modern Hopfield networks?",
    ):
        answer = bot.ask(question)
        assert not answer.abstained and answer.citations, f"{question!r} should be answered"
        assert answer.unsupported == (), f"{question!r}: {answer.unsupported}"


@pytest.mark.slow
def test_ask_shows_unsupported_sentences_in_json_and_marks_them_in_text(fake, built_index):  # noqa: F811
    n = prompt_number(Chatbot(real(built_index, fake.url)))
    content = f"Imagine a town hall meeting with 20,000 residents [{n}]."
    env = {"OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "sk-test", "CHATBOT_MODEL": "test-model"}
    fake.script = [{"content": content}, {"content": content}]
    result = run_cli(built_index, "ask", QUESTION, "--json", **env)
    assert result.returncode == 0, result.stderr
    flagged = json.loads(result.stdout)["unsupported"]
    assert [(u["reason"], u["numbers"]) for u in flagged] == [("not_found", [1])], flagged
    assert "20,000" in flagged[0]["sentence"]
    result = run_cli(built_index, "ask", QUESTION, **env)
    assert result.returncode == 0, result.stderr
    assert "⚠ not found in the cited source [1]: “Imagine a town hall meeting with 20,000" in (
        result.stdout
    ), result.stdout


def test_a_short_sentence_with_a_made_up_figure_is_flagged(fake, built_index):  # noqa: F811
    answer = ask_model(
        fake,
        built_index,
        lambda n: f"It is impossible to let everyone speak [{n}]. It was invented in 1850 [{n}].",
    )
    flagged = [u.sentence for u in answer.unsupported]
    assert flagged == ["It was invented in 1850 [1]."], answer.unsupported


def test_a_short_uncited_sentence_giving_a_figure_is_flagged_a_connective_is_not(fake, built_index):  # noqa: F811
    answer = ask_model(
        fake,
        built_index,
        lambda n: f"In short: it is impossible to let everyone speak [{n}]. In 1850.",
    )
    assert [(u.sentence, u.reason) for u in answer.unsupported] == [("In 1850.", "uncited")]


def test_the_quote_shown_for_a_citation_is_the_evidence_the_verdict_used(fake, built_index):  # noqa: F811
    answer = ask_model(
        fake, built_index, lambda n: f"The town hall meeting pictured has 10,000 residents [{n}]."
    )
    (citation,) = answer.citations
    assert answer.unsupported == ()
    assert "10,000 residents" in citation.quote, citation.quote
    assert citation.quote == " ".join(citation.text[a:b] for a, b in citation.spans)


def test_the_model_can_judge_every_sentence_in_one_call(fake, built_index):  # noqa: F811
    bot = Chatbot(real(built_index, fake.url, support_check="model"))
    n = prompt_number(bot)
    fake.script = [
        {"content": f"A town hall meeting can have 10,000 residents [{n}]. Everyone speaks [{n}]."},
        {"content": '```json\n{"supported": [true, false]}\n```'},
    ]
    answer = bot.ask(QUESTION)
    assert len(fake.requests) == 2, "one extra call judges the whole answer"
    judged = fake.bodies[1]["messages"][-1]["content"]
    assert judged.count("<statement") == 2 and "10,000 residents" in judged
    assert [u.sentence for u in answer.unsupported] == ["Everyone speaks [1]."]


def test_an_unreadable_verdict_falls_back_to_the_lexical_check(fake, built_index):  # noqa: F811
    bot = Chatbot(real(built_index, fake.url, support_check="model"))
    n = prompt_number(bot)
    fake.script = [
        {"content": f"Imagine a town hall meeting with 20,000 residents [{n}]."},
        {"content": "I think they are mostly fine."},
    ]
    answer = bot.ask(QUESTION)
    assert [u.reason for u in answer.unsupported] == ["not_found"], "the lexical check decides"
