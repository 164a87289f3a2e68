"""The OpenAI chat protocol's shapes: a reply, its stream chunks, its sources and its errors.

Plain functions of plain values, so the shapes are checked without a server; `routes.py` serves
them.
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

from chatbot.errors import ChatbotError, ModelError, OptionError, QuestionError
from chatbot.text.tokens import count_tokens

log = logging.getLogger(__name__)

MODEL_ID = "icml-chatbot"
# The sources list the content ends with; earlier assistant messages sent back lose it, so the
# model sees the conversation as it wrote it.
_MARKER = re.compile(r"\[(\d+)\]")
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


# -- the reply ----------------------------------------------------------------------------------


def without_sources(text: str) -> str:
    """An answer as the model wrote it: `text` without the sources list this API appended."""
    return _SOURCES.sub("", text)


@dataclass(frozen=True)
class Asked:
    """A request read: the question, the conversation before it, whether to stream, and the
    reply in the shape of the API that was asked (Chat Completions or Responses)."""

    question: str
    history: list[dict[str, str]]
    stream: bool
    reply: Any


def sources(citations: Sequence[Any]) -> str:
    """The citations as the list that ends a reply's content, or "" when there are none."""
    if not citations:
        return ""
    lines = []
    for c in citations:
        page = f", p. {c.page}" if getattr(c, "page", None) else ""
        lines.append(f"- [{c.n}] {_title(c)}{page}" + (f" — {c.url}" if c.url else ""))
    return "\n\nSources:\n" + "\n".join(lines)


def _title(citation: Any) -> str:
    return " ".join(citation.title.split()) or citation.doc_id


def content(answer: Any) -> str:
    """A reply's content: the answer with its `[n]` markers, then its sources."""
    return answer.text + sources(answer.citations)


def usage(answer: Any) -> dict[str, int]:
    """The answer's token counts in OpenAI's shape.

    A model server's own counts (or the chatbot's estimate of them) when a model was asked;
    for the offline model, which reports none, the cl100k tokens of what it read (the question
    and the passages it was shown) and of the reply's content.
    """
    counts = answer.usage or {}
    prompt = int(counts.get("prompt_tokens", 0))
    completion = int(counts.get("completion_tokens", 0))
    if not prompt:
        read = [answer.standalone_question or answer.question]
        read += [f"{p.title}\n{p.text}" for p in answer.passages]
        prompt = count_tokens("\n\n".join(read))
        completion = count_tokens(content(answer))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def marked(answer: Any) -> Iterator[tuple[int, int, Any]]:
    """Each `[n]` marker of the answer: its start and end in the text, and the Citation."""
    by_n = {c.n: c for c in answer.citations}
    for m in _MARKER.finditer(answer.text):
        if (c := by_n.get(int(m.group(1)))) is not None:
            yield m.start(), m.end(), c


def annotations(answer: Any) -> list[dict[str, Any]]:
    """OpenAI's `url_citation` annotations: each `[n]` marker of the reply's content, with the
    link and title of the source it cites (sources without a link are in `citations` only)."""
    return [
        {
            "type": "url_citation",
            "url_citation": {"url": c.url, "title": _title(c), "start_index": s, "end_index": e},
        }
        for s, e, c in marked(answer)
        if c.url
    ]


def cited(answer: Any) -> dict[str, Any]:
    """What a reply's message (or its last stream chunk) carries beside its content: the
    sources as `citations`, as `ask --json` gives them, and as OpenAI `annotations`."""
    return {
        "annotations": annotations(answer),
        "citations": [c.to_dict() for c in answer.citations],
    }


def extras(answer: Any) -> dict[str, Any]:
    """What this server adds to OpenAI's reply: citations, abstention, unsupported sentences,
    and how the question narrowed the search.

    The same fields as `chatbot ask --json`, so a client can mark what its sources do not back.
    """
    shown = answer.to_dict()
    return {key: shown[key] for key in ("citations", "abstained", "unsupported", "narrowed")}


@dataclass(frozen=True)
class Reply:
    """One Chat Completions reply: whole, or as the server-sent events of a stream.

    Every chunk shares the reply's id and creation time; `include_usage` adds the usage chunk
    a stream ends with (`stream_options.include_usage`).
    """

    include_usage: bool = False
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))

    def head(self, kind: str) -> dict[str, Any]:
        """The fields every `chat.completion` or `chat.completion.chunk` starts with."""
        return {"id": self.id, "object": kind, "created": self.created, "model": MODEL_ID}

    def whole(self, answer: Any) -> dict[str, Any]:
        """The whole reply, for a request without `stream`."""
        message = {
            "role": "assistant",
            "content": content(answer),
            "refusal": None,
            **cited(answer),
        }
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
        if self.include_usage:
            more = {"usage": None, **more}
        return event({**self.head("chat.completion.chunk"), "choices": [choice], **more})

    def start(self) -> list[str]:
        """The events before the answer's first piece."""
        return [self.chunk({"role": "assistant", "content": ""})]

    def piece(self, text: str) -> list[str]:
        """The events carrying one piece of the answer."""
        return [self.chunk({"content": text})]

    def end(self, answer: Any) -> list[str]:
        """The events after the last piece: the sources, then the finish (with the sources as
        data in its delta, as a whole reply's message has them), usage if asked, `[DONE]`."""
        events = [self.chunk({"content": tail})] if (tail := sources(answer.citations)) else []
        events.append(self.chunk(cited(answer), "stop", **extras(answer)))
        if self.include_usage:
            last = {**self.head("chat.completion.chunk"), "choices": [], "usage": usage(answer)}
            events.append(event(last))
        return [*events, event("[DONE]")]

    def failed(self, error: ApiError) -> str:
        """The event ending a stream the answer broke off: never `[DONE]`."""
        return event(error.body())


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
