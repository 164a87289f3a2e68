"""OpenAI's Responses API shapes (`POST /v1/responses`): the same answers, with their sources as
annotations that clients of that API keep.

LangChain's `ChatOpenAI` drops anything but the text from a Chat Completions message; through the
Responses API (`use_responses_api=True`) it keeps each `[n]` marker's annotation as a content
block. A source with a link is a `url_citation`, one without a `file_citation` naming its
document id.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from chatbot.serve.openai_api.chat_request import (
    Lenient,
    Message,
    check_model,
    conversation,
    unsupported,
    validated,
)
from chatbot.serve.openai_api.format import (
    MODEL_ID,
    ApiError,
    Asked,
    content,
    event,
    extras,
    marked,
    usage,
)

# The content parts that carry text, in what a client sends and in earlier answers it sends back.
_TEXT_PARTS = ("input_text", "output_text", "text")


class InputPart(Lenient):
    """One part of an input message's content; only text parts can be read."""

    type: str
    text: str | None = None


class InputItem(Lenient):
    """One item of `input`: a message (tool calls and their outputs are not served)."""

    type: str | None = "message"
    role: str | None = None
    content: str | list[InputPart] | None = None


class ResponsesRequest(Lenient):
    """The body of `POST /v1/responses`, with the fields `read` refuses when it cannot honour."""

    model: str | None = None
    input: str | list[InputItem]
    stream: bool | None = False
    tools: list[Any] | None = None
    tool_choice: Any = None
    text: dict[str, Any] | None = None
    previous_response_id: str | None = None
    background: bool | None = None


def read(body: bytes) -> Asked:
    """A Responses API request: its question, conversation and reply (400/404 ApiError if not)."""
    ask = validated(ResponsesRequest, body)
    check_model(ask.model)
    if ask.tools:
        raise unsupported("tools", "Tool calling")
    if ask.tool_choice not in (None, "none", "auto"):
        raise unsupported("tool_choice", "Tool calling")
    if (ask.text or {}).get("format", {}).get("type", "text") != "text":
        raise unsupported("text.format", "Structured output")
    if ask.previous_response_id:
        # Nothing is stored between requests: the conversation comes with each one.
        raise unsupported("previous_response_id", "Continuing a stored response")
    if ask.background:
        raise unsupported("background", "Answering in the background")
    items = [InputItem(role="user", content=ask.input)] if isinstance(ask.input, str) else ask.input
    messages = []
    for i, item in enumerate(items):
        if item.type not in (None, "message") or item.role is None:
            raise unsupported(f"input.{i}", f"An input item of type {item.type!r}")
        parts = item.content if isinstance(item.content, list) else []
        if other := sorted({p.type for p in parts if p.type not in (*_TEXT_PARTS, "refusal")}):
            raise ApiError(
                400,
                f"Input {i} holds {', '.join(other)} content: this server reads text only. Send "
                "the question as text.",
                code="unsupported_content",
                param=f"input.{i}.content",
            )
        text = (
            "\n".join(p.text for p in parts if p.type in _TEXT_PARTS and p.text)
            if isinstance(item.content, list)
            else item.content or ""
        )
        messages.append(Message(role=item.role, content=text))
    question, history = conversation(messages)
    return Asked(question, history, bool(ask.stream), Response())


def annotations(answer: Any) -> list[dict[str, Any]]:
    """Each `[n]` of the answer as a Responses API annotation of the source it cites."""
    found = []
    for start, end, c in marked(answer):
        if c.url:
            note = {"type": "url_citation", "url": c.url, "title": c.title}
            found.append({**note, "start_index": start, "end_index": end})
        else:
            # `index`: where in the text the file is cited, as OpenAI's file citations give it.
            note = {"type": "file_citation", "file_id": c.doc_id, "filename": c.title}
            found.append({**note, "index": end})
    return found


@dataclass
class Response:
    """One Responses API reply: whole, or as the typed server-sent events of a stream."""

    id: str = field(default_factory=lambda: f"resp_{uuid.uuid4().hex}")
    message_id: str = field(default_factory=lambda: f"msg_{uuid.uuid4().hex}")
    created_at: int = field(default_factory=lambda: int(time.time()))
    sequence: int = 0
    text: str = ""

    def _response(self, status: str, output: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "model": MODEL_ID,
            "output": output,
            "error": None,
            "incomplete_details": None,
            "parallel_tool_calls": False,
            "tool_choice": "none",
            "tools": [],
            **more,
        }

    def _part(self, answer: Any | None) -> dict[str, Any]:
        text = content(answer) if answer is not None else ""
        notes = annotations(answer) if answer is not None else []
        return {"type": "output_text", "text": text, "annotations": notes, "logprobs": []}

    def _item(self, answer: Any | None) -> dict[str, Any]:
        return {
            "type": "message",
            "id": self.message_id,
            "status": "completed" if answer is not None else "in_progress",
            "role": "assistant",
            "content": [self._part(answer)] if answer is not None else [],
        }

    def whole(self, answer: Any) -> dict[str, Any]:
        """The whole reply, for a request without `stream`; `citations` and the rest as in
        Chat Completions replies."""
        counts = usage(answer)
        return self._response(
            "completed",
            [self._item(answer)],
            usage={
                "input_tokens": counts["prompt_tokens"],
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": counts["completion_tokens"],
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": counts["total_tokens"],
            },
            **extras(answer),
        )

    def _event(self, kind: str, **data: Any) -> str:
        self.sequence += 1
        body = {"type": kind, "sequence_number": self.sequence, **data}
        return f"event: {kind}\n" + event(body)

    def _where(self) -> dict[str, Any]:
        return {"item_id": self.message_id, "output_index": 0, "content_index": 0}

    def start(self) -> list[str]:
        """The events before the answer's first piece."""
        return [
            self._event("response.created", response=self._response("in_progress", [])),
            self._event("response.output_item.added", output_index=0, item=self._item(None)),
            self._event("response.content_part.added", **self._where(), part=self._part(None)),
        ]

    def piece(self, text: str) -> list[str]:
        """The event carrying one piece of the answer."""
        self.text += text
        return [self._event("response.output_text.delta", **self._where(), delta=text, logprobs=[])]

    def end(self, answer: Any) -> list[str]:
        """The sources, an event per annotation, then each part's, the item's and the reply's
        completion."""
        tail = content(answer)[len(self.text) :]
        events = self.piece(tail) if tail else []
        for i, note in enumerate(annotations(answer)):
            events.append(
                self._event(
                    "response.output_text.annotation.added",
                    **self._where(),
                    annotation_index=i,
                    annotation=note,
                )
            )
        part = self._part(answer)
        events += [
            self._event(
                "response.output_text.done", **self._where(), text=part["text"], logprobs=[]
            ),
            self._event("response.content_part.done", **self._where(), part=part),
            self._event("response.output_item.done", output_index=0, item=self._item(answer)),
            self._event("response.completed", response=self.whole(answer)),
        ]
        return events

    def failed(self, error: ApiError) -> str:
        """The `error` event ending a stream the answer broke off."""
        # The typed fields for the Responses API's readers, `error` for the openai SDK's.
        fields = {"code": error.code, "message": error.message, "param": error.param}
        return self._event("error", **fields, **error.body())
