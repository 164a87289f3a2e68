"""The OpenAI Chat Completions request: read, checked against what the chatbot can honour, and
turned into a question and the conversation before it. `responses.py` reads the Responses API's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from chatbot.serve.openai_api.format import MODEL_ID, ApiError, without_sources

M = TypeVar("M", bound=BaseModel)


class Lenient(BaseModel):
    """A request object that keeps fields it does not know."""

    # Fields this server does not know are kept and ignored, as sampling settings are (see the
    # note above `check_model`); those it knows it cannot honour are refused by `check_supported`.
    model_config = ConfigDict(extra="allow")


class ContentPart(Lenient):
    """One piece of a message's content; only text parts are read."""

    type: str
    text: str | None = None


class Message(Lenient):
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


class StreamOptions(Lenient):
    """`stream_options`: whether the last chunk carries the token usage."""

    include_usage: bool | None = False


class ChatRequest(Lenient):
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


def validated(model: type[M], body: bytes) -> M:
    """`body` read as `model`, or a 400 ApiError naming what is wrong and where."""
    try:
        return model.model_validate_json(body or b"{}")
    except ValidationError as e:
        first = e.errors()[0]
        if first["type"] == "json_invalid":
            raise ApiError(
                400, "The request body is not valid JSON: send a JSON object.", code="invalid_json"
            ) from None
        param = ".".join(str(part) for part in first["loc"]) or None
        where = f" at {param}" if param else ""
        raise ApiError(400, f"Invalid request{where}: {first['msg']}.", param=param) from None


def parse_request(body: bytes) -> ChatRequest:
    """The request in `body`, or a 400 ApiError naming what is wrong."""
    ask = validated(ChatRequest, body)
    check_supported(ask)
    return ask


# Sampling settings (temperature, top_p, seed, stop, max_tokens, penalties, user, metadata…) are
# accepted and have no effect: the answer is the chatbot's pipeline's, quoted or written from the
# passages, not a sample the client tunes.


def check_model(model: str | None) -> None:
    """Raise a 400 ApiError for a request naming no model, a 404 for a model not served here."""
    if not model:
        raise ApiError(
            400,
            f'The request names no model: send "model": "{MODEL_ID}".',
            code="missing_required_parameter",
            param="model",
        )
    if model != MODEL_ID:
        raise ApiError(
            404,
            f"The model {model!r} does not exist: this server answers as {MODEL_ID!r}.",
            code="model_not_found",
            param="model",
        )


def unsupported(param: str, what: str) -> ApiError:
    """The 400 ApiError for a parameter asking for what the chatbot cannot do."""
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
    check_model(ask.model)
    if ask.n not in (None, 1):
        raise unsupported("n", f"n={ask.n} (several choices per request)")
    for param in ("tools", "functions"):
        if getattr(ask, param):
            raise unsupported(param, "Tool calling")
    for param in ("tool_choice", "function_call"):
        if getattr(ask, param) not in (None, "none", "auto"):
            raise unsupported(param, "Tool calling")
    kind = (ask.response_format or {}).get("type", "text")
    if kind != "text":
        raise unsupported("response_format", f"response_format {kind!r} (structured output)")
    if ask.logprobs or ask.top_logprobs:
        raise unsupported("logprobs" if ask.logprobs else "top_logprobs", "Log probabilities")
    if ask.audio is not None or any(m != "text" for m in ask.modalities or []):
        raise unsupported("audio" if ask.audio is not None else "modalities", "Audio output")
    if ask.prediction is not None:
        raise unsupported("prediction", "Predicted output")
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
