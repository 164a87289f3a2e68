"""Chat models by name: the offline model, or any OpenAI-compatible server.

`OpenAICompatibleChat` is a LangChain chat model of our own that sends each call through a
`ChatOpenAI` (built on first use: `langchain_openai` takes seconds to import) by its public
`generate`/`stream`. It retries timeouts, 429, 5xx and streams that fail before their first token,
refuses a stream that stops before its end, asks again without streaming when a stream is empty
(llama.cpp's server says why only then), and translates `openai` errors into `ModelError`.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Iterator
from typing import Any
from uuid import UUID

import httpx2
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult, LLMResult
from pydantic import Field, PrivateAttr, SecretStr

from chatbot.answer.models.event_stream import EmptyStream, StreamCut, end_checking_client
from chatbot.errors import ModelError
from chatbot.settings import Settings, safe_url

log = logging.getLogger(__name__)

OPENAI_URL = "https://api.openai.com/v1"
# Waits between tries: doubling from BACKOFF seconds, never longer than MAX_BACKOFF.
BACKOFF = 0.5
MAX_BACKOFF = 8.0


def make_chat_model(
    settings: Settings, *, sleep: Callable[[float], None] = time.sleep
) -> BaseChatModel:
    """The chat model on the OpenAI-compatible server the settings name.

    `sleep` waits between tries (tests pass one that records the waits).
    """
    return OpenAICompatibleChat(
        model_name=settings.model_name,
        api_key=settings.openai_api_key or SecretStr("not-needed"),
        base_url=settings.openai_base_url,
        timeout=settings.timeout,
        tries=max(1, settings.max_retries),
        max_tokens=settings.max_answer_tokens,
        sleep=sleep,
    )


class OpenAICompatibleChat(BaseChatModel):
    """A model on an OpenAI-compatible server, with bounded retries and errors a user can act on.

    Retries are this class's, not the openai client's (`max_retries=0`): the client cannot retry
    a stream whose first event is an error or that closes before its first token (tests
    test_failure_before_the_first_token_of_a_stream_is_retried and
    test_a_stream_closed_before_its_first_token_is_tried_again), and a second retry layer would
    multiply the tries and the wait that "did not answer after N tries" reports.
    """

    model_name: str
    api_key: SecretStr = SecretStr("not-needed")
    base_url: str | None = None
    timeout: float = 60.0
    tries: int = 3
    max_tokens: int = 512
    sleep: Callable[[float], None] = Field(default=time.sleep, exclude=True, repr=False)
    _client: Any = PrivateAttr(default=None)

    @property
    def _llm_type(self) -> str:
        return "openai-compatible"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "server": self.server}

    @property
    def server(self) -> str:
        """The server's URL as shown to users (no credentials)."""
        return safe_url(self.base_url or OPENAI_URL)

    def _openai(self) -> BaseChatModel:
        """The `ChatOpenAI` that makes the requests, built on first use."""
        if self._client is None:
            from langchain_openai import ChatOpenAI

            if self.server == OPENAI_URL:
                tokens: dict[str, Any] = {"max_tokens": self.max_tokens}
            else:
                # ChatOpenAI sends `max_completion_tokens`; llama.cpp and Ollama read `max_tokens`.
                tokens = {"extra_body": {"max_tokens": self.max_tokens}}
            self._client = ChatOpenAI(
                model=self.model_name,
                api_key=self.api_key.get_secret_value(),
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=0,
                http_client=end_checking_client(),
                temperature=0,
                # Servers other than OpenAI send usage in the last chunk only when asked to.
                stream_usage=True,
                # Other servers speak Chat Completions only, never the Responses API.
                use_responses_api=False,
                **tokens,
            )
        return self._client

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        for attempt in range(1, self.tries + 1):
            try:
                # No callbacks inside: this model's own run reports usage and tokens once.
                result = self._openai().generate([messages], stop=stop, callbacks=[], **kwargs)
            except Exception as e:
                self._after_failure(e, attempt)
                continue
            generations = result.generations[0] if result.generations else []
            if not generations:
                raise ModelError(f"The model server at {self.server} sent no choices.")
            if _finish_reason(generations[0]) == "length":
                raise ModelError(self._token_limit_message("reply"))
            return ChatResult(generations=generations, llm_output=result.llm_output)
        raise AssertionError("unreachable")  # pragma: no cover

    def _stream(self, messages, stop=None, run_manager=None, **kwargs) -> Iterator[Any]:
        for attempt in range(1, self.tries + 1):
            shown, finish = False, None
            try:
                chunks = self._openai().stream(messages, {"callbacks": []}, stop=stop, **kwargs)
                for chunk in chunks:
                    shown = shown or bool(chunk.text)
                    finish = chunk.response_metadata.get("finish_reason") or finish
                    yield ChatGenerationChunk(message=chunk)
            except EmptyStream:
                yield self._unstreamed(messages, stop, **kwargs)
                return
            except Exception as e:
                if shown:
                    # Part of the answer is on the user's screen: trying again would repeat it.
                    raise _translate(e, self, attempt, cut=True) from _cause(e, self)
                self._after_failure(e, attempt)
                continue
            if finish == "length":
                raise ModelError(self._token_limit_message("answer"))
            return

    def _unstreamed(self, messages, stop, **kwargs) -> ChatGenerationChunk:
        """The answer asked for again without streaming, as one chunk.

        llama.cpp's server answers a request it cannot serve (a prompt longer than its context
        window) with an empty event stream and drops the connection; without streaming it says
        why (HTTP 400). A new client leaves the dropped connection behind.
        """
        self._client = None
        message = self._generate(messages, stop=stop, **kwargs).generations[0].message
        chunk = AIMessageChunk(
            content=message.content,
            usage_metadata=getattr(message, "usage_metadata", None),
            response_metadata=message.response_metadata,
        )
        return ChatGenerationChunk(message=chunk)

    def _token_limit_message(self, what: str) -> str:
        return (
            f"The model server at {self.server} cut the {what} off at the token limit "
            f"({self.max_tokens} tokens): raise CHATBOT_MAX_ANSWER_TOKENS or ask a "
            "narrower question."
        )

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
        self.sleep(delay)


# -- a stream must end with [DONE] or a finish_reason --------------------------------------------


def _finish_reason(generation: Any) -> str | None:
    return (getattr(generation, "generation_info", None) or {}).get("finish_reason")


# -- errors ------------------------------------------------------------------------------------


def _retryable(e: Exception) -> bool:
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
    key = getattr(model, "api_key", None)
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


_CUT = "The model server at {server} stopped in the middle of the answer ({reason}); ask again."
_GAVE_UP = (
    "The model server at {server} did not answer after {tries} ({reason}{said}). Check that it "
    "is running and not overloaded; a slow server needs a larger CHATBOT_TIMEOUT."
)
# For an error that is not worth another try: the first `openai` class it is an instance of.
_REFUSALS = (
    (
        "AuthenticationError",
        "The model server at {server} refused the API key (HTTP 401{said}): check OPENAI_API_KEY.",
    ),
    (
        "PermissionDeniedError",
        "The model server at {server} does not allow this request (HTTP 403{said}): "
        "check OPENAI_API_KEY and that it may use the model {name!r}.",
    ),
    (
        "NotFoundError",
        "The model server at {server} does not know the model {name!r} or the URL is wrong "
        "(HTTP 404{said}): check CHATBOT_MODEL, and that OPENAI_BASE_URL ends in /v1.",
    ),
    (
        "APIConnectionError",
        "Cannot connect to the model server at {server} ({connection}): "
        "check that it is running and that OPENAI_BASE_URL is right.",
    ),
    (
        "BadRequestError",
        "The model server at {server} rejected the request (HTTP 400{said}).{hint}",
    ),
    ("APIStatusError", "The model server at {server} answered HTTP {status}{said}."),
)
_NOT_A_COMPLETION = (
    "The model server at {server} sent a reply that is not a chat completion ({kind}): "
    "check that OPENAI_BASE_URL points to an OpenAI-compatible /v1 endpoint."
)
_WINDOW_HINT = " If the prompt is too long, set CHATBOT_CONTEXT_WINDOW to the model's window."
_OVERFLOW = (
    "The prompt is longer than the context window of the model at {server} (HTTP {status}{said}). "
    "Set CHATBOT_CONTEXT_WINDOW{window} to the window the server runs with (llama.cpp: --n_ctx "
    "or -c; Ollama: num_ctx), and the chatbot shortens the prompt to fit it."
)
# How servers report a prompt over the context window: OpenAI and vLLM ("maximum context length
# is N tokens"), llama-cpp-python (the same; "exceed context window of N"), llama.cpp's
# llama-server ("exceeds the available context size", with n_ctx in the error).
_OVERFLOW_WORDS = re.compile(r"context (?:length|window|size)", re.IGNORECASE)
_WINDOW_SIZE = re.compile(r"context (?:length|window|size)\D{0,20}?(\d[\d,]*)", re.IGNORECASE)


def _window_said(e: Exception, said: str) -> str | None:
    """The context window the server names in its error, when the error is an overflow."""
    import openai

    if not isinstance(e, openai.APIStatusError) or e.status_code not in (400, 413):
        return None
    body = getattr(e, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    if error.get("code") != "context_length_exceeded" and not _OVERFLOW_WORDS.search(said):
        return None
    found = _WINDOW_SIZE.search(said)
    return str(error.get("n_ctx") or (found[1].replace(",", "") if found else ""))


def _translate(e: Exception, model: Any, tries: int, cut: bool = False) -> ModelError:
    """The ModelError a user can act on, for an exception raised by the openai client."""
    import openai

    if isinstance(e, ModelError):
        return ModelError(redact(str(e), _secret(model)))
    said = _server_says(e)
    words = ("context", "too long", "maximum", "tokens")
    facts = {
        "server": model.server,
        "name": model.model_name,
        "said": f": {said}" if said else "",
        "reason": _reason(e),
        "tries": f"{tries} {'try' if tries == 1 else 'tries'}",
        "connection": _connection_reason(e),
        "status": getattr(e, "status_code", None),
        "kind": type(e).__name__,
        "hint": _WINDOW_HINT if any(w in said.lower() for w in words) else "",
    }
    window = None if cut else _window_said(e, said)
    if window is not None:
        facts["window"] = f"={window}" if window else ""
        template = _OVERFLOW
    elif cut:
        template = _CUT
    elif _retryable(e):
        template = _GAVE_UP
    else:
        refusals = (t for kind, t in _REFUSALS if isinstance(e, getattr(openai, kind)))
        template = next(refusals, _NOT_A_COMPLETION)
    return ModelError(redact(template.format(**facts), _secret(model)))


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
        from chatbot.answer.budget import count_messages

        prompt = sum(count_messages(m, self.model) for m in messages)
        self._calls[run_id] = (self._clock(), prompt)

    def on_llm_new_token(self, token: str, *, run_id: UUID, **_) -> None:
        call = self._calls.get(run_id)
        if token and call and self.first_token is None:
            self.first_token = self._clock() - call[0]

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **_) -> None:
        from chatbot.text.tokens import count_tokens

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
