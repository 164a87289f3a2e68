"""Chat models by name: the offline model, or any OpenAI-compatible server through ChatOpenAI.

The real model is `ChatOpenAI` with its own retries switched off: this module retries timeouts,
429 and 5xx itself (a stream only before its first token), so the number of tries and the message
a user finally sees are ours, and it translates `openai` errors into `ModelError` at the edge.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult

from .errors import ModelError
from .settings import Settings, safe_url

log = logging.getLogger(__name__)

OPENAI_URL = "https://api.openai.com/v1"
# Waits between tries: doubling from BACKOFF seconds, never longer than MAX_BACKOFF.
BACKOFF = 0.5
MAX_BACKOFF = 8.0
_sleep = time.sleep  # tests replace it to see the waits


def make_chat_model(settings: Settings) -> BaseChatModel:
    """The chat model the settings name; the offline one when no real model is configured."""
    if settings.uses_offline_model:
        from .offline import OfflineChatModel

        return OfflineChatModel()
    return _openai_chat_class()(
        model=settings.model_name,
        api_key=settings.openai_api_key or "not-needed",
        base_url=settings.openai_base_url,
        timeout=settings.timeout,
        max_retries=0,
        tries=max(1, settings.max_retries),
        server=safe_url(settings.openai_base_url or OPENAI_URL),
        max_tokens=settings.max_answer_tokens,
        temperature=0,
        # Servers other than OpenAI send usage in the last chunk only when asked to.
        stream_usage=True,
        # Other servers speak Chat Completions only, never the Responses API.
        use_responses_api=False,
    )


@lru_cache(maxsize=1)
def _openai_chat_class() -> type[BaseChatModel]:
    # langchain_openai takes seconds to import: only pay for it when a real model is used.
    from langchain_openai import ChatOpenAI
    from openai._streaming import SSEDecoder
    from pydantic import model_validator

    class _EndCheckingDecoder(SSEDecoder):
        """Server-sent events, ending in `StreamCut` when the stream stops before its end."""

        def iter_bytes(self, iterator):
            started = ended = False
            for event in super().iter_bytes(iterator):
                started, ended = True, ended or _ends_stream(event.data)
                yield event
            # A body with no events at all is not a stream: `_stream` says so in its own words.
            if started and not ended:
                raise StreamCut("the connection closed before the end of the answer")

    class OpenAICompatibleChat(ChatOpenAI):
        """ChatOpenAI that retries with bounded backoff and raises `ModelError` when it gives up."""

        tries: int = 3
        server: str = OPENAI_URL

        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            for attempt in range(1, self.tries + 1):
                try:
                    result = super()._generate(messages, stop, run_manager, **kwargs)
                except Exception as e:
                    self._after_failure(e, attempt)
                    continue
                if not result.generations:
                    raise ModelError(f"The model server at {self.server} sent no choices.")
                if _finish_reason(result.generations[0]) == "length":
                    raise ModelError(self._token_limit_message("reply"))
                return result
            raise AssertionError("unreachable")  # pragma: no cover

        def _stream(self, messages, stop=None, run_manager=None, **kwargs):
            for attempt in range(1, self.tries + 1):
                started = received = False
                finish = None
                try:
                    for chunk in super()._stream(messages, stop, run_manager, **kwargs):
                        started = started or bool(chunk.text)
                        received = True
                        finish = _finish_reason(chunk) or finish
                        yield chunk
                except Exception as e:
                    if started:
                        # Part of the answer is on the user's screen: trying again would repeat it.
                        raise _translate(e, self, attempt, cut=True) from _cause(e, self)
                    self._after_failure(e, attempt)
                    continue
                if not received:
                    raise ModelError(
                        f"The model server at {self.server} sent a reply that is not a chat "
                        "completion stream: check that OPENAI_BASE_URL points to an "
                        "OpenAI-compatible /v1 endpoint."
                    )
                if finish == "length":
                    raise ModelError(self._token_limit_message("answer"))
                return

        @model_validator(mode="after")
        def _check_stream_ends(self):
            # A stream is whole only when the server ends it ([DONE] or a finish_reason); the
            # openai client takes a closed connection for the end. The client asks this hook
            # for each stream's decoder.
            if self.root_client is not None:
                self.root_client._make_sse_decoder = _EndCheckingDecoder
            return self

        def _token_limit_message(self, what: str) -> str:
            return (
                f"The model server at {self.server} cut the {what} off at the token limit "
                f"({self.max_tokens} tokens): raise CHATBOT_MAX_ANSWER_TOKENS or ask a "
                "narrower question."
            )

        def _get_request_payload(self, input_, *, stop=None, **kwargs):
            payload = super()._get_request_payload(input_, stop=stop, **kwargs)
            if self.server != OPENAI_URL and "max_completion_tokens" in payload:
                # OpenAI renamed the field; llama.cpp and Ollama still read only `max_tokens`.
                payload["max_tokens"] = payload.pop("max_completion_tokens")
            return payload

        def _after_failure(self, e: Exception, attempt: int) -> None:
            """Sleep before the next try, or raise the ModelError that explains `e`."""
            if isinstance(e, ModelError):
                raise e
            if not _retryable(e) or attempt >= self.tries:
                raise _translate(e, self, attempt) from _cause(e, self)
            delay = _delay(e, attempt)
            log.warning(
                "Model server at %s: %s; trying again in %.1f s (try %d of %d).",
                self.server,
                _reason(e),
                delay,
                attempt + 1,
                self.tries,
            )
            _sleep(delay)

    return OpenAICompatibleChat


# -- errors ------------------------------------------------------------------------------------


class StreamCut(Exception):
    """The server closed a stream without [DONE] or a finish_reason: the answer is not whole."""


def _ends_stream(data: str) -> bool:
    """True for the event that ends a chat completion stream: [DONE], or a finish_reason."""
    if data.startswith("[DONE]"):
        return True
    if '"finish_reason"' not in data:
        return False
    try:
        choices = json.loads(data).get("choices") or []
    except (ValueError, AttributeError):
        return False
    return any(isinstance(c, dict) and c.get("finish_reason") for c in choices)


def _finish_reason(generation: Any) -> str | None:
    return (getattr(generation, "generation_info", None) or {}).get("finish_reason")


def _retryable(e: Exception) -> bool:
    import httpx2
    import openai

    if isinstance(e, openai.APITimeoutError | httpx2.TimeoutException | StreamCut):
        return True
    if isinstance(e, openai.APIStatusError):
        return e.status_code in (408, 409, 429) or e.status_code >= 500
    # An error event in a stream (no status code): the server failed while answering.
    return type(e) is openai.APIError


def _delay(e: Exception, attempt: int) -> float:
    """Seconds to wait: the server's Retry-After when it gives one, else jittered doubling."""
    headers = getattr(getattr(e, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return min(MAX_BACKOFF, max(0.0, float(headers[name]) * scale))
        except (KeyError, TypeError, ValueError):
            continue
    return min(MAX_BACKOFF, BACKOFF * 2 ** (attempt - 1)) * random.uniform(0.75, 1.0)


def _reason(e: Exception) -> str:
    import openai

    if isinstance(e, openai.APITimeoutError) or "Timeout" in type(e).__name__:
        return "timed out"
    if isinstance(e, openai.APIStatusError):
        return f"HTTP {e.status_code}"
    if type(e) is openai.APIError:
        return "server error"
    if isinstance(e, StreamCut):
        return str(e)
    return type(e).__name__


def _secret(model: Any) -> str | None:
    key = getattr(model, "openai_api_key", None)
    value = key.get_secret_value() if hasattr(key, "get_secret_value") else key
    return value if isinstance(value, str) and len(value) >= 4 else None


def redact(text: str, secret: str | None) -> str:
    """`text` with `secret` (the API key) blanked out."""
    return text.replace(secret, "[redacted]") if secret else text


def _cause(e: Exception, model: Any) -> Exception | None:
    """The exception to chain: the original, unless its text would show the key in a trace."""
    secret = _secret(model)
    if secret and any(secret in str(x) for x in (e, e.__cause__, e.__context__) if x):
        return None
    return e


def _server_says(e: Exception) -> str:
    """The server's own error message, short."""
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        text = inner.get("message") if isinstance(inner, dict) else inner
        text = str(text or "")
    else:
        text = str(body or "")
    text = " ".join(text.split())
    return text[:200] + ("…" if len(text) > 200 else "")


def _translate(e: Exception, model: Any, tries: int, cut: bool = False) -> ModelError:
    """The ModelError a user can act on, for an exception raised by the openai client."""
    import openai

    server, name = model.server, model.model_name
    said = _server_says(e)
    said = f": {said}" if said else ""
    if isinstance(e, ModelError):
        message = str(e)
    elif cut:
        message = (
            f"The model server at {server} stopped in the middle of the answer "
            f"({_reason(e)}); ask again."
        )
    elif _retryable(e):
        message = (
            f"The model server at {server} did not answer after {tries} "
            f"{'try' if tries == 1 else 'tries'} ({_reason(e)}{said}). Check that it is running "
            "and not overloaded; a slow server needs a larger CHATBOT_TIMEOUT."
        )
    elif isinstance(e, openai.AuthenticationError):
        message = (
            f"The model server at {server} refused the API key (HTTP 401{said}): "
            "check OPENAI_API_KEY."
        )
    elif isinstance(e, openai.PermissionDeniedError):
        message = (
            f"The model server at {server} does not allow this request (HTTP 403{said}): "
            f"check OPENAI_API_KEY and that it may use the model {name!r}."
        )
    elif isinstance(e, openai.NotFoundError):
        message = (
            f"The model server at {server} does not know the model {name!r} or the URL is wrong "
            f"(HTTP 404{said}): check CHATBOT_MODEL, and that OPENAI_BASE_URL ends in /v1."
        )
    elif isinstance(e, openai.APIConnectionError):
        message = (
            f"Cannot connect to the model server at {server} ({_connection_reason(e)}): "
            "check that it is running and that OPENAI_BASE_URL is right."
        )
    elif isinstance(e, openai.BadRequestError):
        hint = ""
        if any(w in said.lower() for w in ("context", "too long", "maximum", "tokens")):
            hint = " If the prompt is too long, set CHATBOT_CONTEXT_WINDOW to the model's window."
        message = f"The model server at {server} rejected the request (HTTP 400{said}).{hint}"
    elif isinstance(e, openai.APIStatusError):
        message = f"The model server at {server} answered HTTP {e.status_code}{said}."
    else:
        message = (
            f"The model server at {server} sent a reply that is not a chat completion "
            f"({type(e).__name__}): check that OPENAI_BASE_URL points to an OpenAI-compatible "
            "/v1 endpoint."
        )
    return ModelError(redact(message, _secret(model)))


def _connection_reason(e: BaseException) -> str:
    chain: list[BaseException] = []
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    if any(isinstance(x, ConnectionRefusedError) for x in chain):
        return "connection refused"
    text = " ".join(str(x) for x in chain).lower()
    if "refused" in text:
        return "connection refused"
    if "name" in text and ("resolve" in text or "not known" in text):
        return "unknown host name"
    return "connection failed"


# -- usage -------------------------------------------------------------------------------------


class UsageTracker(BaseCallbackHandler):
    """Adds up prompt and completion tokens of the model calls it watches.

    Uses the server's usage report when it sends one, and counts with tiktoken otherwise.
    """

    def __init__(self, model: str | None = None, clock: Callable[[], float] = time.perf_counter):
        self.model = model
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.estimated = False
        self.first_token: float | None = None  # seconds from the last call's start
        self._clock = clock
        self._calls: dict[UUID, tuple[float, int]] = {}

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID, **_
    ) -> None:
        from .budget import count_messages

        prompt = sum(count_messages(m, self.model) for m in messages)
        self._calls[run_id] = (self._clock(), prompt)

    def on_llm_new_token(self, token: str, *, run_id: UUID, **_) -> None:
        call = self._calls.get(run_id)
        if token and call and self.first_token is None:
            self.first_token = self._clock() - call[0]

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **_) -> None:
        from .tokens import count_tokens

        _, prompt = self._calls.pop(run_id, (0.0, 0))
        for generations in response.generations:
            for gen in generations:
                usage = getattr(getattr(gen, "message", None), "usage_metadata", None)
                if usage and usage.get("input_tokens"):
                    self.prompt_tokens += usage["input_tokens"]
                    self.completion_tokens += usage.get("output_tokens", 0)
                else:
                    self.estimated = True
                    self.prompt_tokens += prompt
                    self.completion_tokens += count_tokens(gen.text, self.model)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **_) -> None:
        self._calls.pop(run_id, None)

    def usage(self) -> dict[str, int]:
        """`prompt_tokens`, `completion_tokens` and `total_tokens` so far."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
