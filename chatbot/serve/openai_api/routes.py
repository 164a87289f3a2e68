"""The chatbot over OpenAI's protocols: `POST /v1/chat/completions`, `POST /v1/responses` and
`GET /v1/models`.

Any OpenAI client (the `openai` SDK, simonw's `llm`, LangChain, Open WebUI, editor plugins) can
ask: the last user message is the question, the user and assistant messages before it the
conversation. System messages are ignored: what a client sends is data, never instructions. The
request is read in `chat_request.py` (Chat Completions) or `responses.py` (Responses), the reply
shaped in `format.py`; this module decides who may ask, how many answers run at once, and
serves the routes: beside the web UI (`chatbot serve`) or alone (`--api-only`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import SecretStr
from starlette.concurrency import run_in_threadpool
from starlette.routing import BaseRoute, Match

from chatbot.errors import ConfigError, EmptyIndexError
from chatbot.serve.guard import LoginThrottle, bearer
from chatbot.serve.openai_api import responses as responses_api
from chatbot.serve.openai_api.chat_request import conversation, parse_request
from chatbot.serve.openai_api.format import MODEL_ID, ApiError, Asked, Reply, api_error, trimmed

log = logging.getLogger(__name__)

# Answers computed at once, by the web UI's queue and by the API alike. The offline model is
# CPU-bound: a few answers at a time. An API model mostly waits on the network, so more.
CONCURRENCY_OFFLINE = 4
CONCURRENCY_API = 16
# How long a request may wait for a free answering slot before it is told to come back (429).
QUEUE_WAIT = 30.0
# The largest request body read: a long conversation is a few hundred KB.
MAX_BODY_BYTES = 4 * 1024 * 1024
_LOCAL_NAMES = frozenset({"localhost"})


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
        sent = bearer(request.headers.get("authorization", ""))
        expected = self.key.get_secret_value().encode()
        # The key is checked first: a right key is served even while wrong ones from the same
        # address wait, so one bad script cannot lock out every tool behind one address.
        if sent is not None and secrets.compare_digest(sent.encode(), expected):
            return
        if sent is not None and (wait := self.throttle.failed(address, "key")):
            seconds = math.ceil(wait)
            raise ApiError(
                429,
                f"Too many wrong API keys from this address: wait {seconds} s, then try again "
                "with the right key.",
                "requests",
                "rate_limit_exceeded",
                headers={"retry-after": str(seconds)},
            )
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
        return await self._answer(request, chat_completion)

    async def responses(self, request: Request) -> Response:
        """`POST /v1/responses`: the same answer in the shape of OpenAI's Responses API."""
        return await self._answer(request, responses_api.read)

    async def _answer(self, request: Request, read: Callable[[bytes], Asked]) -> Response:
        try:
            self.access.check(request)
            asked = read(await _body(request))
            await self._acquire()
        except ApiError as e:
            return e.response()
        handed_over = False
        try:
            stream = await run_in_threadpool(self.bot.stream, asked.question, asked.history)
            if not asked.stream:
                answer = await run_in_threadpool(stream.result)
                return JSONResponse(asked.reply.whole(answer))
            pieces = trimmed(iter(stream))
            # Read up to the first piece before answering 200: a question that cannot be asked
            # or a model that is down gets its status code, not an error inside the stream.
            first = await run_in_threadpool(next, pieces, None)
            body = self._events(asked.reply, stream, first, pieces)
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
        self, reply: Any, stream: Any, first: str | None, pieces: Iterator[str]
    ) -> AsyncIterator[str]:
        for e in reply.start():
            yield e
        try:
            piece = first
            while piece is not None:
                for e in reply.piece(piece):
                    yield e
                piece = await run_in_threadpool(next, pieces, None)
        except Exception as e:
            # The reply has begun (status 200): the error is the stream's last event.
            yield reply.failed(api_error(e))
            return
        for e in reply.end(stream.answer):
            yield e


def chat_completion(body: bytes) -> Asked:
    """A Chat Completions request: its question, conversation and reply."""
    ask = parse_request(body)
    question, history = conversation(ask.messages)
    return Asked(question, history, bool(ask.stream), Reply(ask.include_usage))


async def _body(request: Request) -> bytes:
    """The request's body, read no further than MAX_BODY_BYTES (a 413 ApiError beyond)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ApiError(
                413,
                f"The request is larger than {MAX_BODY_BYTES // (1024 * 1024)} MB: send a shorter "
                "conversation (the question and its last turns are enough).",
                code="request_too_large",
                param="messages",
            )
        chunks.append(chunk)
    return b"".join(chunks)


_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def routes(
    bot: Any,
    key: SecretStr | None,
    limit: int,
    *,
    locked: bool = False,
    throttle: LoginThrottle | None = None,
) -> list[BaseRoute]:
    """The API's routes, to serve beside the web UI (sharing its `throttle`) or alone."""
    access = Access(key, locked, throttle or LoginThrottle())
    api = Api(bot, access, limit, QUEUE_WAIT)
    router = APIRouter(prefix="/v1")
    router.add_api_route("/models", api.models, methods=["GET"])
    router.add_api_route("/models/{model}", api.model_info, methods=["GET"])
    router.add_api_route("/chat/completions", api.completions, methods=["POST"])
    router.add_api_route("/responses", api.responses, methods=["POST"])
    served = list(router.routes)

    async def elsewhere(request: Request) -> Response:
        """Any other method or path under /v1: 405 or 404 in OpenAI's error shape."""
        for route in served:
            match, _ = route.matches(request.scope)
            if match == Match.PARTIAL:  # the path is served, with another method
                allowed = ", ".join(sorted(getattr(route, "methods", ())))
                return ApiError(
                    405,
                    f"{request.method} is not allowed on {request.url.path}: use {allowed}.",
                    code="method_not_allowed",
                    headers={"allow": allowed},
                ).response()
        return ApiError(
            404,
            f"{request.url.path} is not served here: this API serves POST /v1/chat/completions, "
            "POST /v1/responses, GET /v1/models and GET /v1/models/{model}.",
            code="unknown_url",
        ).response()

    # After the served routes: only what none of them takes in full reaches it.
    router.add_api_route("/{path:path}", elsewhere, methods=_METHODS)
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
    bot: Any, host: str = "127.0.0.1", port: int = 7860, *, block: bool = True
) -> Running | None:
    """Serve only the API on host:port until Ctrl-C; block=False returns the running server."""
    import uvicorn

    key = bot.settings.api_key
    check_exposure(host, key)
    try:
        bot.ensure_index()
    except EmptyIndexError as e:
        # The server still starts: every question gets this message (a 503) saying how to fill it.
        log.warning("%s", e)
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.router.routes.extend(routes(bot, key, concurrency(bot)))
    sock = _bind(host, port)
    proxies = bot.settings.trusted_proxies
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
        # X-Forwarded-For names the client only when it comes from a proxy the settings name:
        # otherwise any client could pick the address its wrong keys are counted against.
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or "",
    )
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
