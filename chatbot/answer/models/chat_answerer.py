"""A LangChain chat model (an OpenAI-compatible server) behind the model boundary: the prompt files
of `prompts/` rendered from the structured request, fitted to the model's context window."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from chatbot.answer.budget import Budget, Fitted, fit
from chatbot.answer.models.boundary import (
    AnswerRequest,
    Condensed,
    CondenseRequest,
    Reply,
)
from chatbot.answer.prompts import NO_ANSWER, escape, format_history, format_passages, load_prompts
from chatbot.errors import ChatbotError, ModelError
from chatbot.settings import Settings
from chatbot.values import Passage
from chatbot.verify.judge import load_judge_prompt, parse_verdicts

log = logging.getLogger(__name__)


@dataclass
class ChatModelAnswerer:
    """A LangChain chat model (an OpenAI-compatible server) behind the model boundary.

    Renders the prompt files from the structured request, keeps the prompt within the model's
    context window, counts the tokens it uses and streams its answer.
    """

    llm: BaseChatModel
    settings: Settings
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or self.settings.model_label

    def _tracker(self):
        from chatbot.answer.models.openai_compat import UsageTracker

        return UsageTracker(self.settings.model_name)

    def condense(self, request: CondenseRequest) -> Condensed:
        """Ask the model to rewrite the follow-up with `prompts/condense.txt`."""
        template = ChatPromptTemplate.from_messages(
            [("human", load_prompts(self.settings.prompts_dir).condense)]
        )
        question = escape(request.question)
        # A long conversation loses its oldest turns first to fit the context window.
        fitted = self._fit(
            lambda _, turns: template.format_messages(
                history=format_history(turns), question=question
            ),
            [],
            request.history,
            size=lambda turn: turn["content"],
            keep_passages=0,
        )
        inputs = {"history": format_history(fitted.history), "question": question}
        tracker = self._tracker()
        try:
            chain = template | self.llm | StrOutputParser()
            out = chain.invoke(inputs, config={"callbacks": [tracker]})
        except ChatbotError:
            raise
        except Exception as e:
            raise ModelError(f"The model failed to rewrite the follow-up question: {e}") from e
        question = out.strip().strip('"').strip() or request.question
        return Condensed(question, tracker.usage())

    def answer(self, request: AnswerRequest) -> Reply:
        """Render `prompts/system.txt` and `answer.txt`, fitted to the window, and stream."""
        prompts = load_prompts(self.settings.prompts_dir)
        template = ChatPromptTemplate.from_messages(
            [("system", prompts.system), MessagesPlaceholder("history"), ("human", prompts.answer)]
        )
        kinds = {"user": HumanMessage, "assistant": AIMessage}
        turns = [kinds[t["role"]](escape(t["content"])) for t in request.history]
        fixed = {"question": escape(request.standalone), "no_answer": NO_ANSWER}
        fitted = self._fit(
            lambda ps, ts: template.format_messages(
                passages=format_passages(ps), history=ts, **fixed
            ),
            request.passages,
            turns,
            size=lambda x: x.text if isinstance(x, Passage) else str(x.content),
        )
        messages = template.format_messages(
            passages=format_passages(fitted.passages), history=fitted.history, **fixed
        )
        tracker = self._tracker()
        pieces = self._stream(messages, tracker)
        return Reply(
            pieces, fitted.passages, usage=tracker.usage, first_token=lambda: tracker.first_token
        )

    def _stream(self, messages: list[BaseMessage], tracker) -> Iterator[str]:
        # The model's own stream, not a chain's: closing it (Stop in the web UI) closes the
        # server's HTTP response, where a chain would read its input to the end first.
        try:
            for chunk in self.llm.stream(messages, config={"callbacks": [tracker]}):
                yield chunk.text
        except ChatbotError:
            raise
        except Exception as e:
            raise ModelError(
                f"The model failed to answer ({e}); check CHATBOT_MODEL and OPENAI_BASE_URL, "
                "or use the offline model with --model offline."
            ) from e

    def judge(self, claims: list[tuple[str, list[Passage]]]) -> list[bool] | None:
        """The model's verdict on each (sentence, cited passages), in one call; None if unclear."""
        blocks = []
        for i, (sentence, passages) in enumerate(claims, 1):
            blocks.append(
                f'<statement n="{i}">\n{escape(sentence)}\n</statement>\n'
                f"<passages>\n{format_passages(passages)}\n</passages>"
            )
        prompt = load_judge_prompt(self.settings.prompts_dir).format(statements="\n".join(blocks))
        try:
            reply = self.llm.invoke([HumanMessage(prompt)])
        except ChatbotError as e:
            log.warning("The model could not judge the answer (%s); using the lexical check.", e)
            return None
        return parse_verdicts(str(reply.content), len(claims))

    def _fit(self, render, passages, history, **kwargs: Any) -> Fitted:
        return fit(
            render, list(passages), list(history), Budget.for_settings(self.settings), **kwargs
        )
