"""One gate for every way in: with a key or a login set, no route answers or changes state without
it, forwarded headers are believed only from a named proxy, and wrong credentials are throttled
without ever refusing a right one. Servers are real (`web.serve`), clients are httpx and
gradio_client; time is a clock the test steps, never a sleep."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AuthenticationError

from chatbot import Chatbot, Settings
from chatbot.errors import ConfigError
from chatbot.serve import guard as webguard
from chatbot.serve.guard import LOGIN_ATTEMPTS, LOGIN_COOLDOWN, LoginThrottle
from chatbot.serve.web import app as web
from tests.helpers import free_port, private_index

KEY = "sk-gate-test-7f3a91"
QUESTION = "What is generative social choice?"
# Every route of Gradio's app that answers a question, changes state or lists what exists, with
# a body it would accept. None may answer without the key or the login.
ROUTES = [
    ("POST", "gradio_api/call/chat", {"data": [QUESTION]}),
    ("POST", "gradio_api/queue/join", {"data": [QUESTION], "fn_index": 0, "session_hash": "x"}),
    ("GET", "gradio_api/queue/data?session_hash=x", None),
    ("POST", "gradio_api/cancel", {"session_hash": "x", "fn_index": 0, "event_id": "x"}),
    ("POST", "reset", {"session_hash": "x", "fn_index": 0, "event_id": "x"}),
    ("POST", "gradio_api/reset", {"session_hash": "x", "fn_index": 0, "event_id": "x"}),
    ("POST", "gradio_api/upload", None),
    ("GET", "gradio_api/file=/etc/hostname", None),
    ("GET", "gradio_api/info", None),
    ("GET", "openapi.json", None),
    ("GET", "docs", None),
    ("POST", "gradio_api/run/chat", {"data": [QUESTION]}),
]


class Clock:
    """A monotonic clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def clock() -> Iterator[Clock]:
    """The clock every throttle of this module's servers reads."""
    fake = Clock()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(webguard, "CLOCK", fake)
        yield fake


@pytest.fixture
def quiet(clock) -> Clock:
    """The clock, moved past any wait and count an earlier test left behind."""
    clock.advance(webguard.FORGET_AFTER + webguard.LOGIN_COOLDOWN_MAX)
    return clock


@pytest.fixture(scope="module")
def gate_data(built_index, tmp_path_factory) -> Path:
    return private_index(built_index, tmp_path_factory, "gate")


def _serve(data: Path, auth: str | None = None, host: str = "127.0.0.1", **settings):
    bot = Chatbot(Settings.load(env_file=None, data_dir=data, **settings))
    port = free_port()
    app = web.serve(bot, host=host, port=port, auth=auth, block=False)
    return f"http://127.0.0.1:{port}/", app


@pytest.fixture(scope="module")
def keyed(gate_data, clock) -> Iterator[str]:
    """A server with an API key and no login, as `serve --api-key K` starts it."""
    url, app = _serve(gate_data, api_key=KEY)
    yield url
    app.close()


@pytest.fixture(scope="module")
def login(gate_data, clock) -> Iterator[str]:
    """A server with a login and no key."""
    url, app = _serve(gate_data, auth="ada:s3cret")
    yield url
    app.close()


def _call(url: str, method: str, path: str, body, **headers) -> httpx.Response:
    with httpx.Client(timeout=30) as http:
        return http.request(method, url + path, json=body, headers=headers)


def _cited(result) -> bool:
    """True when /chat gave a real answer: the `ask --json` dict, citing source [1]."""
    return (
        isinstance(result, dict)
        and not result["abstained"]
        and "[1]" in result["answer"]
        and [c["n"] for c in result["citations"]][:1] == [1]
    )


def test_with_a_key_no_route_answers_without_it(keyed):
    for method, path, body in ROUTES:
        response = _call(keyed, method, path, body)
        assert response.status_code == 401, f"{method} /{path} answered without the key"
        assert "Bearer" in response.json()["detail"], f"/{path} should say how to get in"
    page = httpx.get(keyed, timeout=30)
    assert page.status_code == 200, "the login page itself stays open"
    with pytest.raises(AuthenticationError):
        Client(keyed, verbose=False).predict(QUESTION, api_name="/chat")


def test_with_a_key_gradio_client_and_the_browser_login_get_in(keyed):
    bearer = {"Authorization": f"Bearer {KEY}"}
    answer = Client(keyed, verbose=False, headers=bearer).predict(QUESTION, api_name="/chat")
    assert _cited(answer), f"the key opens Gradio's API: {answer!r}"
    # The browser has no header to send: its login form takes the key as the password.
    with httpx.Client(timeout=30) as http:
        assert http.post(keyed + "login", data={"username": "me", "password": "no"}).is_error
        ok = http.post(keyed + "login", data={"username": "me", "password": KEY})
        assert ok.status_code == 200, f"the key is the login form's password: {ok.text}"
        info = http.get(keyed + "gradio_api/info")
        assert info.status_code == 200, "the session from the login opens the API"


def test_with_a_login_no_route_answers_without_it_and_gradio_client_logs_in(login):
    for method, path, body in ROUTES:
        response = _call(login, method, path, body)
        assert response.status_code == 401, f"{method} /{path} answered without the login"
        assert "log in" in response.json()["detail"]
    with pytest.raises(AuthenticationError):
        Client(login, verbose=False).predict(QUESTION, api_name="/chat")
    client = Client(login, verbose=False, auth=("ada", "s3cret"))
    answer = client.predict(QUESTION, api_name="/chat")
    assert _cited(answer), f"the login opens Gradio's API: {answer!r}"


def _wrong_keys(url: str, n: int, path: str = "v1/models", rotate: bool = True) -> list[int]:
    """Send `n` wrong keys, each (when `rotate`) claiming another address in X-Forwarded-For."""
    statuses = []
    for i in range(n):
        headers = {"Authorization": f"Bearer wrong-{i}"}
        if rotate:
            headers["X-Forwarded-For"] = f"203.0.113.{i + 1}"
        statuses.append(httpx.get(url + path, headers=headers, timeout=30).status_code)
    return statuses


def test_forwarded_for_rotation_is_throttled_and_a_right_key_is_still_served(keyed, quiet):
    clock = quiet
    for path in ("v1/models", "gradio_api/info"):
        statuses = _wrong_keys(keyed, LOGIN_ATTEMPTS + 3, path)
        assert statuses[:LOGIN_ATTEMPTS] == [401] * LOGIN_ATTEMPTS, statuses
        assert set(statuses[LOGIN_ATTEMPTS:]) == {429}, (
            f"a new X-Forwarded-For per guess must not escape the throttle on /{path}: {statuses}"
        )
        right = httpx.get(
            keyed + path, headers={"Authorization": f"Bearer {KEY}"}, timeout=30
        ).status_code
        assert right == 200, f"a right key after another client's wrong ones is served: {right}"
        refused = httpx.get(keyed + path, headers={"Authorization": "Bearer x"}, timeout=30)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
        clock.advance(webguard.FORGET_AFTER + webguard.LOGIN_COOLDOWN_MAX)
        after = httpx.get(keyed + path, headers={"Authorization": "Bearer y"}, timeout=30)
        assert after.status_code == 401, "after a quiet hour a wrong key is told it is wrong"
        clock.advance(webguard.FORGET_AFTER + 1)


def _login_as(url: str, user: str, password: str, via: str | None = None) -> int:
    headers = {"X-Forwarded-For": via} if via else {}
    data = {"username": user, "password": password}
    return httpx.post(url + "login", data=data, headers=headers, timeout=30).status_code


def test_wrong_logins_wait_with_doubling_waits_and_the_right_one_always_passes(login, quiet):
    clock = quiet
    statuses = [_login_as(login, "ada", f"guess{i}") for i in range(LOGIN_ATTEMPTS + 2)]
    assert statuses == [400] * LOGIN_ATTEMPTS + [429, 429], statuses
    assert _login_as(login, "ada", "s3cret") == 200, "the right password is never refused"
    clock.advance(webguard.LOGIN_COOLDOWN_MAX + 1)
    # The wait is over: the next wrong one is told it is wrong, and starts a longer wait.
    assert _login_as(login, "ada", "again") == 400
    refused = httpx.post(login + "login", data={"username": "ada", "password": "x"}, timeout=30)
    assert refused.status_code == 429 and "wait" in refused.json()["detail"]
    assert int(refused.headers["retry-after"]) > LOGIN_COOLDOWN, refused.headers


def test_forwarded_for_names_the_client_only_from_a_trusted_proxy(gate_data, quiet):
    # Through a trusted proxy each client has its own count; the same user names differ so
    # only the per-address count can lock.
    url, app = _serve(gate_data, auth="ada:s3cret", trusted_proxies="127.0.0.1")
    try:
        statuses = [
            _login_as(url, f"user{i}", "wrong", via="198.51.100.7")
            for i in range(LOGIN_ATTEMPTS + 1)
        ]
        assert statuses[-1] == 429, f"one client behind the proxy is throttled: {statuses}"
        assert _login_as(url, "bob", "wrong", via="198.51.100.8") == 400, (
            "another client behind the trusted proxy keeps its own count"
        )
    finally:
        app.close()
    url, app = _serve(gate_data, auth="ada:s3cret")
    try:
        statuses = [
            _login_as(url, f"user{i}", "wrong", via=f"198.51.100.{i}")
            for i in range(LOGIN_ATTEMPTS + 1)
        ]
        assert statuses[-1] == 429, f"without a trusted proxy the header is ignored: {statuses}"
    finally:
        app.close()


def test_the_throttle_counts_per_credential_and_address():
    clock = Clock()
    throttle = LoginThrottle(clock)
    for i in range(LOGIN_ATTEMPTS):
        assert throttle.failed(f"10.0.0.{i}", "login:ada") == 0.0
    assert throttle.waiting("10.0.0.99", "login:ada") == LOGIN_COOLDOWN, (
        "guesses for one user from many addresses count together"
    )
    assert throttle.waiting("10.0.0.200", "login:bob") == 0.0, "other users and addresses wait not"
    clock.advance(LOGIN_COOLDOWN)
    assert throttle.waiting("10.0.0.99", "login:ada") == 0.0, "the wait ends on the clock"


def test_made_up_user_names_cannot_grow_the_throttle_without_bound(monkeypatch):
    monkeypatch.setattr(webguard, "MAX_COUNTS", 50)
    clock = Clock()
    throttle = LoginThrottle(clock)
    for _ in range(LOGIN_ATTEMPTS):
        throttle.failed("10.0.0.1", "login:ada")
    for i in range(2000):
        clock.advance(0.001)
        throttle.failed(f"10.1.{i // 250}.{i % 250}", f"login:made-up-{i}")
    assert len(throttle._counts) <= 50 + 2, "bounded: a wrong login adds two counts at most"
    assert throttle.waiting("10.9.9.9", "login:ada") > 0, "a wait in force is kept"


def test_the_login_can_come_from_the_environment(gate_data, quiet, monkeypatch):
    # `--auth user:password` shows in `ps`; CHATBOT_AUTH (or .env) does not.
    monkeypatch.setenv("CHATBOT_AUTH", "ada:env-s3cret")
    url, app = _serve(gate_data)
    try:
        assert _login_as(url, "ada", "env-s3cret") == 200, "the login from CHATBOT_AUTH works"
        assert httpx.get(url + "gradio_api/info", timeout=30).status_code == 401
    finally:
        app.close()


def test_serving_other_machines_needs_a_key_and_then_seals_every_route(gate_data, clock):
    with pytest.raises(ConfigError, match="--api-key"):
        _serve(gate_data, host="0.0.0.0")
    url, app = _serve(gate_data, host="0.0.0.0", api_key=KEY)
    try:
        chat = _call(url, "POST", "gradio_api/call/chat", {"data": [QUESTION]})
        assert chat.status_code == 401, "on 0.0.0.0 with only a key, the UI's API is sealed"
    finally:
        app.close()


def test_a_login_with_a_blank_user_or_password_is_refused_before_serving(gate_data, capsys):
    from chatbot.serve import cli

    bot = Chatbot(Settings.load(env_file=None, data_dir=gate_data))
    for auth in ("ada: ", " :s3cret", "ada:\t", " : ", ("ada", " ")):
        port = free_port()
        with pytest.raises(ConfigError) as refused:
            web.serve(bot, port=port, auth=auth, block=False)
        message = str(refused.value)
        assert "user:password" in message and "\n" not in message, f"{auth!r}: {message}"
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # nothing listens there: refused before binding
    command = ["--data-dir", str(gate_data), "serve", "--auth", "ada: ", "--port", str(free_port())]
    assert cli.main(command) == 1, "`serve --auth 'ada: '` stops"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--auth" in err, f"one line naming the flag: {err!r}"


def test_an_environment_without_a_login_leaves_the_local_server_open(gate_data):
    assert "CHATBOT_AUTH" not in os.environ
    url, app = _serve(gate_data)
    try:
        answer = Client(url, verbose=False).predict(QUESTION, api_name="/chat")
        assert _cited(answer), (
            f"with no key and no login on 127.0.0.1, nothing is asked for: {answer!r}"
        )
    finally:
        app.close()


def test_the_api_alone_ignores_forwarded_for_too(gate_data, quiet):
    from chatbot.serve.openai_api import routes as api

    bot = Chatbot(Settings.load(env_file=None, data_dir=gate_data, api_key=KEY))
    running = api.serve(bot, port=free_port(), block=False)
    try:
        base = running.url.removesuffix("v1")
        statuses = _wrong_keys(base, LOGIN_ATTEMPTS + 2)
        assert statuses[LOGIN_ATTEMPTS:] == [429, 429], f"--api-only is throttled too: {statuses}"
        right = httpx.get(base + "v1/models", headers={"Authorization": f"Bearer {KEY}"})
        assert right.status_code == 200, "and the right key is still served"
    finally:
        running.close()
