"""The chatbot over the OpenAI chat protocol: `POST /v1/chat/completions` and `GET /v1/models`.

Any OpenAI client (the `openai` SDK, simonw's `llm`, Open WebUI, editor plugins) can ask: the
last user message is the question, the user and assistant messages before it the conversation.
System messages are ignored: what a client sends is data, never instructions. The reply's content
is the answer with its `[n]` markers followed by the sources as a list, so plain clients show
them; `citations` holds the same sources as data. `chatbot serve` serves these routes beside the
web UI, `chatbot serve --api-only` alone.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import math
import re
import secrets
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.routing import BaseRoute

from .errors import ChatbotError, ConfigError, ModelError, OptionError, QuestionError
from .webguard import LoginThrottle

log = logging.getLogger(__name__)

MODEL_ID = "icml-chatbot"
# Answers computed at once, by the web UI's queue and by the API alike. The offline model is
# CPU-bound: a few answers at a time. An API model mostly waits on the network, so more.
CONCURRENCY_OFFLINE = 4
CONCURRENCY_API = 16
# How long a request may wait for a free answering slot before it is told to come back (429).
QUEUE_WAIT = 30.0
_LOCAL_NAMES = frozenset({"localhost"})
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
        self.status, self.message, self.type, self.code, self.param = (
            status,
            message,
            type_,
            code,
            param,
        )
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
        lines.append(f"- [{c.n}] {title}" + (f" — {c.url}" if c.url else ""))
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
    """What this server adds to OpenAI's reply: the citations and whether it abstained."""
    return {
        "citations": [c.to_dict() for c in answer.citations],
        "abstained": answer.abstained,
    }


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


# -- who may ask --------------------------------------------------------------------------------


def is_local(host: str) -> bool:
    """Whether `host` is a loopback address, reachable from this machine only."""
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, key: SecretStr | None) -> None:
    """Refuse to serve the API to other machines without a key (a ConfigError saying how)."""
    if key is None and not is_local(host):
        raise ConfigError(
            f"Serving on {host} opens the API to other machines: give it a key with --api-key KEY "
            "(or CHATBOT_API_KEY), or serve on 127.0.0.1."
        )


def _bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


@dataclass
class Access:
    """The key the API asks for (None: none), and slow-down for wrong keys as for the login.

    `locked` is for a server whose web UI asks for a login and whose API has no key: answering
    without one would let anyone past the login.
    """

    key: SecretStr | None
    locked: bool = False
    throttle: LoginThrottle = field(default_factory=LoginThrottle)

    def check(self, request: Request) -> None:
        """Raise a 401 or 429 ApiError unless `request` may be answered."""
        if self.key is None:
            if self.locked:
                raise ApiError(
                    401,
                    "This server asks for a login and its API has no key: start it with "
                    "--api-key KEY (or CHATBOT_API_KEY) and send that key.",
                    code="invalid_api_key",
                )
            return
        address = request.client.host if request.client else "unknown"
        # No await between admitting, checking and forgiving: requests cannot interleave here.
        if wait := self.throttle.admit(address):
            seconds = math.ceil(wait)
            raise ApiError(
                429,
                f"Too many wrong API keys from this address: wait {seconds} s, then try again "
                "with the right key.",
                "requests",
                "rate_limit_exceeded",
                headers={"retry-after": str(seconds)},
            )
        sent = _bearer(request.headers.get("authorization", ""))
        expected = self.key.get_secret_value().encode()
        if sent is not None and secrets.compare_digest(sent.encode(), expected):
            self.throttle.succeeded(address)
            return
        what = "No API key was sent" if sent is None else "The API key is wrong"
        raise ApiError(
            401,
            f"{what}: send the key this server was started with (--api-key or CHATBOT_API_KEY) "
            "as 'Authorization: Bearer KEY'.",
            code="invalid_api_key",
        )


# -- answering ----------------------------------------------------------------------------------


class _Held(StreamingResponse):
    """A streamed reply that gives its answering slot back however the stream ends."""

    def __init__(self, body: AsyncIterator[str], release: Callable[[], None]) -> None:
        headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
        super().__init__(body, media_type="text/event-stream", headers=headers)
        self._release = release

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


class Api:
    """The routes' state: the bot, who may ask, and the answering slots."""

    def __init__(self, bot: Any, access: Access, limit: int, wait: float = QUEUE_WAIT) -> None:
        self.bot, self.access, self.wait = bot, access, wait
        self.slots = asyncio.Semaphore(limit)
        self.started = int(time.time())

    async def models(self, request: Request) -> Response:
        """`GET /v1/models`: the one model this server answers with."""
        try:
            self.access.check(request)
        except ApiError as e:
            return e.response()
        return JSONResponse({"object": "list", "data": [self.model()]})

    async def model_info(self, request: Request) -> Response:
        """`GET /v1/models/{model}`: this server's model, or 404."""
        try:
            self.access.check(request)
            name = request.path_params["model"]
            if name != MODEL_ID:
                raise ApiError(
                    404,
                    f"The model {name!r} does not exist: this server answers as {MODEL_ID!r}.",
                    code="model_not_found",
                    param="model",
                )
        except ApiError as e:
            return e.response()
        return JSONResponse(self.model())

    def model(self) -> dict[str, Any]:
        """This server's model as `/v1/models` lists it."""
        return {"id": MODEL_ID, "object": "model", "created": self.started, "owned_by": "chatbot"}

    async def completions(self, request: Request) -> Response:
        """`POST /v1/chat/completions`: the answer, whole or as server-sent events."""
        try:
            self.access.check(request)
            ask = parse_request(await request.body())
            question, history = conversation(ask.messages)
            await self._acquire()
        except ApiError as e:
            return e.response()
        handed_over = False
        try:
            stream = await run_in_threadpool(self.bot.stream, question, history)
            if not ask.stream:
                answer = await run_in_threadpool(stream.result)
                return JSONResponse(Reply().completion(answer))
            pieces = trimmed(iter(stream))
            # Read up to the first piece before answering 200: a question that cannot be asked
            # or a model that is down gets its status code, not an error inside the stream.
            first = await run_in_threadpool(next, pieces, None)
            body = self._events(stream, first, pieces, ask.include_usage)
            handed_over = True
            return _Held(body, self.slots.release)
        except Exception as e:
            return api_error(e).response()
        finally:
            if not handed_over:
                self.slots.release()

    async def _acquire(self) -> None:
        try:
            await asyncio.wait_for(self.slots.acquire(), self.wait)
        except TimeoutError:
            raise ApiError(
                429,
                "The server is busy answering other questions: try again in a minute.",
                "requests",
                "rate_limit_exceeded",
                headers={"retry-after": "60"},
            ) from None

    async def _events(
        self, stream: Any, first: str | None, pieces: Iterator[str], include_usage: bool
    ) -> AsyncIterator[str]:
        reply = Reply()
        more = {"usage": None} if include_usage else {}
        yield reply.chunk({"role": "assistant", "content": ""}, **more)
        try:
            piece = first
            while piece is not None:
                yield reply.chunk({"content": piece}, **more)
                piece = await run_in_threadpool(next, pieces, None)
        except Exception as e:
            # The reply has begun (status 200): the error is the stream's last event.
            yield event(api_error(e).body())
            return
        answer = stream.answer
        if tail := sources(answer.citations):
            yield reply.chunk({"content": tail}, **more)
        yield reply.chunk({}, "stop", **more, **extras(answer))
        if include_usage:
            yield event(
                {**reply.head("chat.completion.chunk"), "choices": [], "usage": usage(answer)}
            )
        yield event("[DONE]")


def routes(bot: Any, key: SecretStr | None, limit: int, *, locked: bool = False) -> list[BaseRoute]:
    """The API's routes, to serve beside the web UI or alone."""
    api = Api(bot, Access(key, locked), limit, QUEUE_WAIT)
    router = APIRouter(prefix="/v1")
    router.add_api_route("/models", api.models, methods=["GET"])
    router.add_api_route("/models/{model}", api.model_info, methods=["GET"])
    router.add_api_route("/chat/completions", api.completions, methods=["POST"])
    return list(router.routes)


def concurrency(bot: Any) -> int:
    """How many answers `bot` computes at once: few for the offline model, more for a server."""
    return CONCURRENCY_OFFLINE if bot.settings.uses_offline_model else CONCURRENCY_API


# -- serving the API alone ----------------------------------------------------------------------


@dataclass
class Running:
    """An API server running in a background thread (`serve(block=False)`)."""

    url: str
    server: Any
    thread: threading.Thread

    def close(self) -> None:
        """Stop the server and wait until it has."""
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve(
    bot: Any, host: str = "127.0.0.1", port: int = 8000, *, block: bool = True
) -> Running | None:
    """Serve only the API on host:port until Ctrl-C; block=False returns the running server."""
    import uvicorn

    key = bot.settings.api_key
    check_exposure(host, key)
    bot.ensure_index()
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.router.routes.extend(routes(bot, key, concurrency(bot)))
    sock = _bind(host, port)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)
    server = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}/v1"
    if block:
        print(f"OpenAI-compatible API served at {url} (Ctrl-C stops it).", flush=True)
        server.run(sockets=[sock])
        return None
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.02)
    return Running(url, server, thread)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family)
    except OSError as e:
        raise ConfigError(
            f"Cannot serve on {host}:{port}: the port is in use or the address is not "
            "available here. Pick another with --port (or --host)."
        ) from e
