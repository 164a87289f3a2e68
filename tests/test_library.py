"""The library as other code uses it: exported types, the version, the LangChain retriever."""

from __future__ import annotations

import importlib.metadata
import inspect

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda

import chatbot
from chatbot import Chatbot, ChatbotRetriever, OptionError, Settings

from .helpers import run_cli

GSC = "Generative Social Choice: The Next Generation"


def test_every_type_a_public_method_returns_or_raises_is_exported(data_dir):
    bot = Chatbot(Settings.load(env_file=None, data_dir=data_dir))
    report = bot.ingest(progress=False)
    assert type(report) is chatbot.IngestReport, "ingest returns the exported IngestReport"
    passages = bot.retrieve("optimal transport", k=2)
    assert passages and all(type(p) is chatbot.Passage for p in passages)
    assert all(type(d) is chatbot.Document for d in bot.documents())
    with pytest.raises(chatbot.OptionError):
        bot.retrieve("optimal transport", k=0)
    for name in set(chatbot.__all__) - {"__version__"}:
        value = getattr(chatbot, name)
        assert getattr(value, "__module__", "").startswith("chatbot"), name
        if inspect.isclass(value):
            assert value.__doc__, f"{name} says in one line what it is"
    assert set(chatbot.__all__) <= set(dir(chatbot))


def test_chatbot_version_prints_the_installed_version(tmp_path):
    done = run_cli(tmp_path, "--version")
    expected = importlib.metadata.version("icml-chatbot")
    assert done.returncode == 0 and done.stdout.strip() == f"chatbot {expected}", done
    assert chatbot.__version__ == expected


def test_the_retriever_is_the_hybrid_search_as_a_langchain_runnable(bot):
    retriever = ChatbotRetriever(bot=bot, k=3)
    assert isinstance(retriever, BaseRetriever)
    question = "Why are deep ensembles described as an illusion?"
    docs = retriever.invoke(question)
    expected = bot.retrieve(question, k=3)
    assert [d.id for d in docs] == [p.passage_id for p in expected], "the same hybrid search"
    assert [d.metadata["score"] for d in docs] == [p.score for p in expected]
    first = docs[0]
    assert isinstance(first, LCDocument) and first.page_content == expected[0].text
    assert first.metadata["doc_id"] == expected[0].doc_id and first.metadata["title"]
    assert first.metadata["url"], "the document's own metadata comes along"
    chain = retriever | RunnableLambda(lambda found: [d.metadata["doc_id"] for d in found])
    assert chain.invoke(question) == [p.doc_id for p in expected], "it composes with |"
    assert chain.batch([question, question]) == [chain.invoke(question)] * 2


def test_the_retriever_filters_with_where(bot):
    question = "Why are deep ensembles described as an illusion?"
    unfiltered = ChatbotRetriever(bot=bot, k=5).invoke(question)
    assert any(d.metadata.get("paper") != GSC for d in unfiltered)
    only = ChatbotRetriever(bot=bot, k=5, where={"paper": GSC}).invoke(question)
    assert only, "the filter keeps the papers it names"
    assert {d.metadata["doc_id"] for d in only} == {"generative-social-choice"}, only
    with pytest.raises(OptionError, match="k"):
        ChatbotRetriever(bot=bot, k=0).invoke(question)
