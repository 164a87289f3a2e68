"""The OpenAI chat protocol's shapes: a request read, a reply, its stream chunks and its errors.

Plain functions of plain values, so the shapes are checked without a server; `api.py` serves them.
The reply's content is the answer with its `[n]` markers followed by the sources as a list, so
plain clients show them; `citations` holds the same sources as data.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import ChatbotError, ModelError, OptionError, QuestionError

log = logging.getLogger(__name__)

MODEL_ID = "icml-chatbot"
# The sources list the content ends with; earlier assistant messages sent back lose it, so the
# model sees the conversation as it wrote it.
_SOURCES = re.compile(r"\n\nSources:\n(?:- \[\d+\][^\n]*(?:\n|\Z))+\s*\Z")
_UNEXPECTED = (
    "Something went wrong on the server while answering. Try again; if it keeps happening, "
    "the server log says why."
)


class ApiError(Exception):
    """A request that gets an OpenAI-shaped error: status, message, type, code and param."""

    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """`{"error": {...}}` as the OpenAI API sends it."""
        keys = {"message": self.message, "type": self.type, "param": self.param, "code": self.code}
        return {"error": keys}

    def response(self) -> JSONResponse:
        """This error as an HTTP response."""
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def api_error(e: Exception) -> ApiError:
    """The API's error for an exception raised while answering."""
    if isinstance(e, ApiError):
        return e
    if isinstance(e, QuestionError | OptionError):
        # The question, or an option of it, cannot be asked as sent.
        return ApiError(400, str(e), code="invalid_question", param="messages")
    if isinstance(e, ModelError):
        return ApiError(503, str(e), "server_error", "model_unavailable")
    if isinstance(e, ChatbotError):
        # The index or the embedding model cannot be used: the message says how to fix it.
        return ApiError(503, str(e), "server_error", "service_unavailable")
    log.exception("unexpected error while answering through the API")
    return ApiError(500, _UNEXPECTED, "server_error", "internal_error")


# -- the request --------------------------------------------------------------------------------


class _Open(BaseModel):
    # Fields this server does not use (temperature, tools, n…) are accepted and ignored.
    model_config = ConfigDict(extra="allow")


class ContentPart(_Open):
    """One piece of a message's content; only text parts are read."""

    type: str
    text: str | None = None


class Message(_Open):
    """One message of the conversation the client sends."""

    role: str
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text, its text parts joined."""
        if isinstance(self.content, list):
            return "\n".join(p.text for p in self.content if p.type == "text" and p.text)
        return self.content or ""


class StreamOptions(_Open):
    """`stream_options`: whether the last chunk carries the token usage."""

    include_usage: bool | None = False


class ChatRequest(_Open):
    """The body of `POST /v1/chat/completions`; `model` is accepted, the chatbot answers."""

    messages: list[Message]
    model: str | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None

    @property
    def include_usage(self) -> bool:
        """Whether a streamed reply ends with a usage chunk."""
        return bool(self.stream_options and self.stream_options.include_usage)


def parse_request(body: bytes) -> ChatRequest:
    """The request in `body`, or a 400 ApiError naming what is wrong."""
    try:
        return ChatRequest.model_validate_json(body or b"{}")
    except ValidationError as e:
        first = e.errors()[0]
        if first["type"] == "json_invalid":
            raise ApiError(
                400, "The request body is not valid JSON: send a JSON object.", code="invalid_json"
            ) from None
        param = ".".join(str(part) for part in first["loc"]) or None
        where = f" at {param}" if param else ""
        raise ApiError(400, f"Invalid request{where}: {first['msg']}.", param=param) from None


def conversation(messages: Sequence[Message]) -> tuple[str, list[dict[str, str]]]:
    """The question (the last user message) and the user and assistant turns before it."""
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=None)
    if last is None:
        raise ApiError(
            400,
            "The request has no user message: the last message with role 'user' is the question.",
            code="invalid_question",
            param="messages",
        )
    history = [
        {
            "role": m.role,
            "content": without_sources(m.text()) if m.role == "assistant" else m.text(),
        }
        for m in messages[:last]
        if m.role in ("user", "assistant")
    ]
    return messages[last].text(), history


def without_sources(text: str) -> str:
    """An answer as the model wrote it: `text` without the sources list this API appended."""
    return _SOURCES.sub("", text)


# -- the reply ----------------------------------------------------------------------------------


def sources(citations: Sequence[Any]) -> str:
    """The citations as the list that ends a reply's content, or "" when there are none."""
    if not citations:
        return ""
    lines = []
    for c in citations:
        title = " ".join(c.title.split()) or c.doc_id
        page = f", p. {c.page}" if getattr(c, "page", None) else ""
        lines.append(f"- [{c.n}] {title}{page}" + (f" — {c.url}" if c.url else ""))
    return "\n\nSources:\n" + "\n".join(lines)


def content(answer: Any) -> str:
    """A reply's content: the answer with its `[n]` markers, then its sources."""
    return answer.text + sources(answer.citations)


def usage(answer: Any | None) -> dict[str, int]:
    """The answer's token counts in OpenAI's shape (zeros for a model that counts none)."""
    counts = answer.usage if answer is not None else {}
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    return {key: int(counts.get(key, 0)) for key in keys}


def extras(answer: Any) -> dict[str, Any]:
    """What this server adds to OpenAI's reply: citations, abstention, unsupported sentences,
    and how the question narrowed the search.

    The same fields as `chatbot ask --json`, so a client can mark what its sources do not back.
    """
    shown = answer.to_dict()
    return {key: shown[key] for key in ("citations", "abstained", "unsupported", "narrowed")}


@dataclass(frozen=True)
class Reply:
    """The id and creation time every chunk of one reply shares."""

    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))

    def head(self, kind: str) -> dict[str, Any]:
        """The fields every `chat.completion` or `chat.completion.chunk` starts with."""
        return {"id": self.id, "object": kind, "created": self.created, "model": MODEL_ID}

    def completion(self, answer: Any) -> dict[str, Any]:
        """The whole reply, for a request without `stream`."""
        message = {"role": "assistant", "content": content(answer), "refusal": None}
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
        return {
            **self.head("chat.completion"),
            "choices": [choice],
            "usage": usage(answer),
            **extras(answer),
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        """One server-sent event carrying one chunk of a streamed reply."""
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return event({**self.head("chat.completion.chunk"), "choices": [choice], **more})


def event(data: dict[str, Any] | str) -> str:
    """`data` as one server-sent event."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n"


def trimmed(pieces: Iterator[str]) -> Iterator[str]:
    """`pieces` without leading or trailing white space, as the answer's text has none."""
    started, held = False, ""
    for piece in pieces:
        if not started:
            piece = piece.lstrip()
            if not piece:
                continue
            started = True
        text = held + piece
        kept = text.rstrip()
        held = text[len(kept) :]
        if kept:
            yield kept
