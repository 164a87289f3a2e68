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
from .tokens import count_tokens

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


# -- the request --------------------------------------------------------------------------------


class _Open(BaseModel):
    # Fields this server does not know are kept and ignored, as sampling settings are (see
    # `IGNORED`); those it knows it cannot honour are refused by `check_supported`.
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

    def other_parts(self) -> list[str]:
        """The kinds of content part this server cannot read (images, audio, files)."""
        if not isinstance(self.content, list):
            return []
        return [p.type for p in self.content if p.type not in ("text", "refusal")]


class StreamOptions(_Open):
    """`stream_options`: whether the last chunk carries the token usage."""

    include_usage: bool | None = False


class ChatRequest(_Open):
    """The body of `POST /v1/chat/completions`; `check_supported` refuses what it cannot do."""

    messages: list[Message]
    model: str | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    n: int | None = None
    tools: list[Any] | None = None
    functions: list[Any] | None = None
    tool_choice: Any = None
    function_call: Any = None
    response_format: dict[str, Any] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    modalities: list[str] | None = None
    audio: Any = None
    prediction: Any = None

    @property
    def include_usage(self) -> bool:
        """Whether a streamed reply ends with a usage chunk."""
        return bool(self.stream_options and self.stream_options.include_usage)


def parse_request(body: bytes) -> ChatRequest:
    """The request in `body`, or a 400 ApiError naming what is wrong."""
    try:
        ask = ChatRequest.model_validate_json(body or b"{}")
    except ValidationError as e:
        first = e.errors()[0]
        if first["type"] == "json_invalid":
            raise ApiError(
                400, "The request body is not valid JSON: send a JSON object.", code="invalid_json"
            ) from None
        param = ".".join(str(part) for part in first["loc"]) or None
        where = f" at {param}" if param else ""
        raise ApiError(400, f"Invalid request{where}: {first['msg']}.", param=param) from None
    check_supported(ask)
    return ask


# Sampling settings (temperature, top_p, seed, stop, max_tokens, penalties, user, metadata…) are
# accepted and have no effect: the answer is the chatbot's pipeline's, quoted or written from the
# passages, not a sample the client tunes.


def _unsupported(param: str, what: str) -> ApiError:
    return ApiError(
        400,
        f"{what} is not supported by this server: it answers one question at a time, in text, "
        f"from the indexed papers. Leave out '{param}'.",
        code="unsupported_parameter",
        param=param,
    )


def check_supported(ask: ChatRequest) -> None:
    """Raise the ApiError OpenAI would for a model, or a parameter, this server cannot honour.

    An unknown model is a 404 as `GET /v1/models/{model}` says; a missing one, or a parameter
    asking for something the chatbot cannot do (several choices, tools, JSON output, log
    probabilities, audio, images), is a 400 naming it. Silently ignoring them would hand the
    client an answer to a different request.
    """
    if not ask.model:
        raise ApiError(
            400,
            f'The request names no model: send "model": "{MODEL_ID}".',
            code="missing_required_parameter",
            param="model",
        )
    if ask.model != MODEL_ID:
        raise ApiError(
            404,
            f"The model {ask.model!r} does not exist: this server answers as {MODEL_ID!r}.",
            code="model_not_found",
            param="model",
        )
    if ask.n not in (None, 1):
        raise _unsupported("n", f"n={ask.n} (several choices per request)")
    for param in ("tools", "functions"):
        if getattr(ask, param):
            raise _unsupported(param, "Tool calling")
    for param in ("tool_choice", "function_call"):
        if getattr(ask, param) not in (None, "none", "auto"):
            raise _unsupported(param, "Tool calling")
    kind = (ask.response_format or {}).get("type", "text")
    if kind != "text":
        raise _unsupported("response_format", f"response_format {kind!r} (structured output)")
    if ask.logprobs or ask.top_logprobs:
        raise _unsupported("logprobs" if ask.logprobs else "top_logprobs", "Log probabilities")
    if ask.audio is not None or any(m != "text" for m in ask.modalities or []):
        raise _unsupported("audio" if ask.audio is not None else "modalities", "Audio output")
    if ask.prediction is not None:
        raise _unsupported("prediction", "Predicted output")
    for i, message in enumerate(ask.messages):
        if parts := message.other_parts():
            raise ApiError(
                400,
                f"Message {i} holds {', '.join(sorted(set(parts)))} content: this server reads "
                "text only. Send the question as text.",
                code="unsupported_content",
                param=f"messages.{i}.content",
            )


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
        lines.append(f"- [{c.n}] {_title(c)}" + (f" — {c.url}" if c.url else ""))
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


def annotations(answer: Any) -> list[dict[str, Any]]:
    """OpenAI's `url_citation` annotations: each `[n]` marker of the reply's content, with the
    link and title of the source it cites (sources without a link are in `citations` only)."""
    by_n = {c.n: c for c in answer.citations}
    found = []
    for m in _MARKER.finditer(answer.text):
        c = by_n.get(int(m.group(1)))
        if c is None or not c.url:
            continue
        cite = {"url": c.url, "title": _title(c), "start_index": m.start(), "end_index": m.end()}
        found.append({"type": "url_citation", "url_citation": cite})
    return found


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
    """The id and creation time every chunk of one reply shares."""

    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    created: int = field(default_factory=lambda: int(time.time()))

    def head(self, kind: str) -> dict[str, Any]:
        """The fields every `chat.completion` or `chat.completion.chunk` starts with."""
        return {"id": self.id, "object": kind, "created": self.created, "model": MODEL_ID}

    def completion(self, answer: Any) -> dict[str, Any]:
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
