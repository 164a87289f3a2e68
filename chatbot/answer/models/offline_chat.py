"""The offline model as a LangChain chat model, for chains of one's own.

Inside the chatbot the offline model takes structured input (`offline.OfflineModel`). A chain built
by hand has only messages, so this adapter reads one documented format from the last human
message: the passages as `<passage n="1" title="…">…</passage>` blocks, which
`chatbot.answer.prompts.format_passages` writes, and the question as the text outside them (or
inside a `<question>…</question>` block). Without passages it says what it needs instead of
guessing.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

from chatbot.answer.models.boundary import AnswerRequest
from chatbot.answer.models.offline import OfflineModel
from chatbot.values import Passage

NEEDS_PASSAGES = (
    "The offline model answers only from passages it is given: put them in the message as "
    '<passage n="1" title="…">…</passage> blocks (chatbot.answer.prompts.format_passages '
    "writes them), "
    "then the question."
)
_PASSAGE = re.compile(r'<passage n="(\d+)"([^>]*)>\n?(.*?)\n?</passage>', re.DOTALL)
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
_QUESTION = re.compile(r"<question>\s*(.*?)\s*</question>", re.DOTALL)


def read_message(text: str) -> tuple[str, tuple[Passage, ...]]:
    """The question and the passages of a message written in the documented format."""
    passages = []
    for n, attributes, body in _PASSAGE.findall(text):
        meta = {k: html.unescape(v) for k, v in _ATTRIBUTE.findall(attributes)}
        title = meta.pop("title", "")
        passages.append(Passage(f"p{n}", f"p{n}", title, html.unescape(body), 0.0, meta))
    asked = _QUESTION.search(text)
    question = asked.group(1) if asked else _PASSAGE.sub(" ", text)
    question = html.unescape(re.sub(r"</?passages>", " ", question))
    return " ".join(question.split()), tuple(passages)


class OfflineChatModel(BaseChatModel):
    """The offline model behind LangChain's chat model interface (`invoke`, `stream`)."""

    @property
    def _llm_type(self) -> str:
        return "chatbot-offline"

    def _reply(self, messages: list[BaseMessage]) -> str:
        last = str(messages[-1].content) if messages else ""
        question, passages = read_message(last)
        if not passages:
            return NEEDS_PASSAGES
        text, _ = OfflineModel().reply_text(AnswerRequest(question, question, (), passages))
        return text

    def _generate(self, messages, stop=None, run_manager=None, **kwargs: Any) -> ChatResult:
        message = AIMessage(content=self._reply(messages))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs: Any) -> Iterator[Any]:
        for piece in re.findall(r"\S+\s*", self._reply(messages)):
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
