"""The support check: claims against real summaries, and every answer's sentences against the
passages they cite (a real model through the OpenAI protocol, and the offline model)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from chatbot import Chatbot, Support, Unsupported, support
from chatbot.corpus import read_document

from .conftest import CORPUS
from .helpers import run_cli
from .test_llm import fake, real, server  # noqa: F401  (the fake server's fixtures)


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
UNSUPPORTED = [
    ("number", SOCIAL, "The summary pictures a town hall meeting with 5,000 residents."),
    ("number", SOCIAL, "Imagine a town hall meeting with 10,000 residents, 40% of them online."),
    ("entity", TRANSFORMERS, "From LLMs like Gemini to vision models, attention is everywhere."),
    ("entity", SOCIAL, "Researchers have turned to Meta's Llama models to solve this."),
    ("negation", DIFFUSION, "Autoregressive models do not generate text token by token."),
    ("invented", DIFFUSION, "Masked diffusion models beat autoregressive ones on every benchmark."),
    (
        "invented",
        TRANSFORMERS,
        "The summary concludes that attention fully explains in-context learning.",
    ),
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
    passage = "Accuracy rose by 20% on the benchmark. The model has 7B parameters."
    for claim in (
        "Accuracy rose by twenty percent on the benchmark.",
        "Accuracy rose by 20 percent on the benchmark.",
        "The model has 7 billion parameters.",
    ):
        assert bot.check_claim(claim, passage).supported, claim
    for claim in ("Accuracy rose by 30% on the benchmark.", "The model has 70B parameters."):
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
            f"- Letting everyone speak is impossible [{n}]."
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


MLLM = "04-multimodal-llm-knowledge.md"  # "… details weren’t prevalent in its pre-training data"
OT = "05-optimal-transport.md"  # "the gold standard … because it respects the … geometry"
ROBOT = "09-embodied-mllm-agents.md"  # "figure out the thousands of tiny muscle movements"
SMALL_LM = "14-small-lm-math-reasoning.md"  # "the prevailing wisdom in Artificial Intelligence"
SPEECH = "17-long-form-speech.md"  # "keep going for twenty minutes", "ramble incoherently"
TREES = "11-sparse-decision-trees.md"  # "both highly accurate and sparse … incredibly difficult"
EXTRAPOLATION = "20-neural-extrapolation.md"  # "handle inputs far beyond … hasn’t just fitted"
MULTICLASS = "03-multiclass-linear-classification-noise.md"  # "this is solvable efficiently"
COLLABORATORS = "07-llm-active-collaborators.md"  # "It doesn’t ask for clarification."
CAUSAL = "13-causal-graph-listing.md"  # "Instead, we get a “class” of possible maps."

# Each rule of the check, with a faithful paraphrase it must let through and a change it must
# flag, on real summaries.
RULES = [
    (
        "a negation said with a word of negative polarity ('lacked' for 'weren't prevalent')",
        MLLM,
        "When its pre-training data lacked the specific migration details, the model might "
        "confidently invent a migration route.",
        "When its pre-training data held the specific migration details, the model might "
        "confidently invent a migration route.",
    ),
    (
        "an acronym matched with its spelled-out form, and a title's opposite ignored",
        SMALL_LM,
        "For a long time the prevailing wisdom in AI was that bigger is better.",
        "For a long time the prevailing wisdom in AI was that smaller is better.",
    ),
    (
        "a comparison in a passage that compares nothing is invented",
        TREES,
        "Decision trees are the poster child for interpretability, since they mimic human "
        "reasoning.",
        "Decision trees outperform other models and are the poster child for interpretability.",
    ),
    (
        "a comparison a passage makes with the same word is not invented ('longer')",
        EXTRAPOLATION,
        "A network solving the task on sequences thousands of times longer than its training "
        "ones has found an underlying algorithm.",
        "A network solving the task on sequences thousands of times shorter than its training "
        "ones has found an underlying algorithm.",
    ),
    (
        "one word swapped in a sentence repeated word for word changes what it names",
        ROBOT,
        "The dream is a generalist robot that can understand a command like 'clean up the "
        "kitchen'.",
        "The dream is a specialist robot that can understand a command like 'clean up the "
        "kitchen'.",
    ),
    (
        "a word swapped for one meaning the same ('extremely' for 'incredibly') is no swap",
        TREES,
        "However, building the perfect decision tree, one that is both highly accurate and "
        "sparse (few nodes), is extremely difficult.",
        "However, building the perfect decision rule, one that is both highly accurate and "
        "sparse (few nodes), is incredibly difficult.",
    ),
    (
        "a hyphenated word swapped ('fine-tuning data' for 'pre-training data')",
        MLLM,
        "The model might hallucinate when the migration details weren’t prevalent in its "
        "pre-training data.",
        "The model might hallucinate when the migration details weren’t prevalent in its "
        "fine-tuning data.",
    ),
    (
        "two words swapped at the claim's end, where the sentence goes on",
        OT,
        "For decades OT has been the gold standard for comparing and aligning probability "
        "distributions.",
        "For decades OT has been the gold standard for comparing and aligning word embeddings.",
    ),
    (
        "one word swapped at the claim's end, held by the words before it ('the lens of')",
        EXTRAPOLATION,
        "We typically understand generalization through the lens of interpolation.",
        "We typically understand generalization through the lens of compression.",
    ),
    (
        "a claim stating what every sentence of the passage saying it negates",
        COLLABORATORS,
        "Given a vague question, an LLM immediately gives a generic answer without asking for "
        "clarification.",
        "Given a vague question, an LLM usually asks clarifying questions first.",
    ),
    (
        "'little' before what it qualifies is a negation ('gained little traction')",
        TRANSFORMERS,
        "A compelling theory gaining traction links Transformers to associative memory.",
        "A theory that has gained little traction links Transformers to associative memory.",
    ),
    (
        "'intractable' is the opposite of 'solvable'",
        MULTICLASS,
        "With clean, perfectly accurate labels, the problem can be solved efficiently.",
        "With clean, perfectly accurate labels, the problem is computationally intractable.",
    ),
    (
        "a negation's scope ends at ', and' ('rather than one, and … every valid one')",
        CAUSAL,
        "With hidden factors present, we get a whole class of possible maps rather than one, and "
        "navigating it to find every valid explanation is a massive computational headache.",
        "With hidden factors present, we get a whole class of possible maps rather than one, and "
        "navigating it to find every valid explanation is not a computational headache.",
    ),
    (
        "a magnitude word ('hundreds') is a figure of its own",
        ROBOT,
        "A generalist robot would have to work out thousands of tiny muscle movements to tidy "
        "up the kitchen.",
        "A generalist robot would have to work out hundreds of tiny muscle movements to tidy "
        "up the kitchen.",
    ),
    (
        "a unit of time counts with the figure",
        SPEECH,
        "The summary imagines asking the model to keep going for twenty minutes.",
        "The summary imagines asking the model to keep going for twenty hours.",
    ),
    (
        "a restriction ('already') must stand in the supporting sentence",
        ROBOT,
        "The dream is a generalist robot that understands a command like clean up the kitchen.",
        "A generalist robot already understands a command like clean up the kitchen.",
    ),
    (
        "a restriction must stand in the sentence closest to the claim, not the one before it",
        SOCIAL,
        "Systems such as Polis have already been used in Taiwan to cluster opinions.",
        "Polis already offers a mathematically rigorous selection of representative statements.",
    ),
    (
        "a cause given as the effect",
        OT,
        "OT has long been the gold standard for comparing probability distributions because it "
        "respects the underlying geometry of the data.",
        "The underlying geometry of the data has long been respected because OT is the gold "
        "standard for comparing probability distributions.",
    ),
    (
        "an absolute qualifier ('necessarily') the passage never uses",
        TREES,
        "Building a decision tree that is both highly accurate and sparse is incredibly difficult.",
        "A sparse decision tree is necessarily less accurate than a large one.",
    ),
    (
        "a word the passage negates by its prefix ('incoherently')",
        "17-long-form-speech.md",
        "Over longer durations such models start rambling without coherence.",
        "Over longer durations such models keep speaking coherently.",
    ),
    (
        "an opposite outside the common pairs ('straightforward' for 'incredibly difficult')",
        TREES,
        "Building a decision tree that is both highly accurate and sparse is incredibly difficult.",
        "Building a decision tree that is both highly accurate and sparse is straightforward.",
    ),
    (
        "an everyday opposite ('maximization' for 'minimization')",
        "02-transformers-associative-memory.md",
        "Attention carries out a step of energy minimization to retrieve memories.",
        "Attention carries out a step of energy maximization to retrieve memories.",
    ),
    (
        "an everyday opposite ('open-ended' for 'fixed')",
        SOCIAL,
        "In traditional democratic processes the choices on offer are usually fixed.",
        "In traditional democratic processes the choices on offer are usually open-ended.",
    ),
    (
        "'knowingly or not' denies nothing",
        "08-masked-diffusion-token-order.md",
        "Anyone who has used ChatGPT, knowingly or not, has interacted with an autoregressive "
        "model.",
        "Anyone who has used ChatGPT has never interacted with an autoregressive model.",
    ),
    (
        "'nothing more than' restricts, it does not negate",
        "10-ensemble-illusion.md",
        "Deep ensembles might be nothing more than large models in disguise.",
        "Deep ensembles are nothing like large models.",
    ),
    (
        "a negation's clause ends at 'but'",
        "13-causal-graph-listing.md",
        "With hidden factors present we do not get one clear map but a class of possible maps.",
        "With hidden factors present we get one single, clear map.",
    ),
    (
        "a name used as a kind ('CTF-style') is the name",
        "01-agent-benchmarks-reality.md",
        "Some benchmarks test whether an AI can solve CTF-style security challenges.",
        "Some benchmarks test whether an AI can solve Kaggle-style security challenges.",
    ),
    (
        "a plural unit of time without a figure ('for years') measures nothing",
        SMALL_LM,
        "For years the prevailing wisdom in AI was that bigger is better.",
        "For twenty years the prevailing wisdom in AI was that bigger is better.",
    ),
    (
        "'only a few' counts, it does not restrict",
        TREES,
        "Building a highly accurate tree with only a few nodes is incredibly difficult.",
        "Building a highly accurate tree with only a few nodes is straightforward.",
    ),
    (
        "an absolute qualifier in another form of the word ('guaranteed' for 'Guarantee')",
        "18-algorithmic-collective-action.md",
        "Collectives can obtain statistically guaranteed influence on AI platforms.",
        "Collectives can never obtain statistically guaranteed influence on AI platforms.",
    ),
    (
        "a negation the passage states elsewhere ('It doesn't ask for clarification')",
        "07-llm-active-collaborators.md",
        "Given a vague question, the model gives a generic, confident answer rather than asking "
        "for clarification.",
        "Given a vague question, the model asks for clarification before it answers.",
    ),
    (
        "a negation in the next sentence ('hasn't just fitted a curve') is about other words",
        EXTRAPOLATION,
        "Networks can handle inputs far beyond the bounds of what they were trained on.",
        "A network cannot handle inputs beyond the bounds of its training data.",
    ),
    (
        "how hard something is comes in two poles ('trivial' for 'a massive computational "
        "headache')",
        CAUSAL,
        "Finding every specific, valid causal explanation in this class is a massive "
        "computational headache.",
        "Finding every specific, valid causal explanation in this class is computationally "
        "trivial.",
    ),
    (
        "how much something costs comes in two poles ('negligible' for 'astronomically high')",
        SPEECH,
        "Remembering the beginning of a conversation while generating the middle has an "
        "astronomically high computational cost.",
        "Remembering the beginning of a conversation while generating the middle has a "
        "negligible computational cost.",
    ),
    (
        "a summary said to settle ('confirms') what it only asks",
        DIFFUSION,
        "The summary asks what happens if the end of the sentence is easier to guess than the "
        "middle.",
        "The summary confirms that the end of the sentence is easier to guess than the middle.",
    ),
    (
        "crossed polarity around a contrast ('just attends … rather than' for 'isn't just "
        "attending …; it is')",
        TRANSFORMERS,
        "The attention mechanism isn't just attending to parts of a sequence; it is performing "
        "an energy minimization step to retrieve memories.",
        "The attention mechanism just attends to parts of a sequence rather than performing an "
        "energy minimization step to retrieve memories.",
    ),
    (
        "two words swapped for two related ones ('Random forests' for 'Decision trees')",
        TREES,
        "Decision trees are the poster child for interpretability.",
        "Random forests are the poster child for interpretability.",
    ),
    (
        "a subject swapped in a sentence the claim repeats but for 'is described as'",
        TREES,
        "Decision trees are described as the poster child for interpretability.",
        "Linear classifiers are described as the poster child for interpretability.",
    ),
]


@pytest.mark.parametrize(("rule", "name", "paraphrase", "changed"), RULES)
def test_each_rule_supports_the_paraphrase_and_flags_the_change(
    bot, rule, name, paraphrase, changed
):
    passage = summary(name)
    kept = bot.check_claim(paraphrase, passage)
    assert kept.supported, f"{rule}: {paraphrase!r} should be supported ({kept})"
    flagged = bot.check_claim(changed, passage)
    assert not flagged.supported, f"{rule}: {changed!r} should be flagged ({flagged})"


SAID_ANOTHER_WAY = [
    (
        "12-neural-discovery-mathematics.md",
        "Although mathematics looks like strict logic, getting to a proof is often untidy and "
        "leans on intuition, visualisation and trial and error.",
        "Although mathematics looks like strict logic, getting to a proof is rarely untidy and "
        "never leans on intuition, visualisation or trial and error.",
    ),
    (
        "07-llm-active-collaborators.md",
        "Today's LLMs are mostly trained to satisfy the present request rather than to "
        "consider where the dialogue is going.",
        "Today's LLMs are mostly trained to plan the whole dialogue ahead instead of answering "
        "the present request.",
    ),
]


@pytest.mark.parametrize(("name", "claim", "changed"), SAID_ANOTHER_WAY)
def test_words_said_another_way_still_count_as_covered(bot, name, claim, changed):
    # "untidy" for "messy", "satisfy the present request" for "satisfying the immediate query":
    # the claim's words are not the passage's, but a word meaning about the same stands in.
    passage = summary(name)
    result = bot.check_claim(claim, passage)
    assert result.supported, f"{claim!r} paraphrases {name} but scored {result.score}"


@pytest.mark.parametrize(
    ("name", "claim", "changed"),
    [
        SAID_ANOTHER_WAY[0],
        pytest.param(
            *SAID_ANOTHER_WAY[1],
            marks=pytest.mark.xfail(
                strict=True,
                reason="both halves are said in other words and swapped: near words cover each "
                "half, and no check compares which half the passage negates",
            ),
        ),
    ],
)
def test_the_same_paraphrase_turned_around_is_flagged(bot, name, claim, changed):
    assert not bot.check_claim(changed, summary(name)).supported, changed
