"""The web UI under hostile input: documents that point at outside hosts, password guessing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from chatbot import Chatbot, Settings
from chatbot.serve import guard as webguard
from chatbot.serve.web import app as web
from chatbot.serve.web import view as webview
from tests.helpers import local_server
from tests.serve.web.test_web import ANSWERED, browser, free_port, needs_chromium  # noqa: F401 (browser is a fixture)

QUESTION = "How long do zeppelin hangar acoustics echo?"
TIMEOUT_MS = 30_000


class _Counter(BaseHTTPRequestHandler):
    """A tracking server: answers every request with an empty PNG and remembers its path."""

    hits: list[str]

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def tracker() -> Iterator[tuple[str, list[str]]]:
    """A request-counting server on 127.0.0.1: its base URL and the paths requested from it."""
    hits: list[str] = []
    handler = type("Counter", (_Counter,), {"hits": hits})
    with local_server(handler) as httpd:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", hits


@pytest.fixture
def page(browser):  # noqa: F811 (the fixture imported above)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    pg = context.new_page()
    pg.csp_errors = []
    pg.on(
        "console",
        lambda m: pg.csp_errors.append(m.text) if "Content Security Policy" in m.text else None,
    )
    yield pg
    context.close()


@needs_chromium
def test_remote_images_in_documents_and_answers_are_links_and_never_fetched(
    page, tracker, data_dir, tmp_path
):
    base, hits = tracker
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "zeppelins.md").write_text(
        "---\nid: zeppelins\ntitle: Zeppelin hangar acoustics\n---\n"
        # One sentence holds both images, so the answer quoting it holds both too.
        f"Zeppelin hangar acoustics echo for seconds ![chart]({base}/md.png) in every hangar, "
        f'and the hangars reverberate <img src="{base}/html.png"> like cathedrals of sound.\n',
        "utf-8",
    )
    bot = Chatbot(Settings.load(env_file=None, data_dir=data_dir))
    assert bot.ingest([folder]).added == 1
    answer = bot.ask(QUESTION).text
    assert f"({base}/md.png)" in answer and "<img" in answer, f"the answer holds both: {answer}"
    port = free_port()
    app = web.serve(bot, port=port, block=False)
    try:
        response = page.goto(f"http://127.0.0.1:{port}/")
        policy = response.headers.get("content-security-policy", "")
        assert "img-src 'self' data: blob:;" in policy, f"no CSP limiting images: {policy!r}"
        page.locator("#question textarea").fill(QUESTION)
        page.locator("#question textarea").press("Enter")
        # Under load the sources column can be drawn after the question box: wait for a card.
        page.wait_for_function("document.querySelector('#sources .relevance')")
        page.wait_for_function(ANSWERED, arg=1)
        bubble = page.locator("#chat [data-testid='bot']").first
        link = bubble.get_by_role("link", name="chart")
        assert link.get_attribute("href") == f"{base}/md.png", "the image is shown as a link"
        assert "<img" in bubble.inner_text(), "the HTML tag is shown as text"
        assert "Zeppelin hangar acoustics" in page.locator("#sources").inner_text()

        page.get_by_role("tab", name="Documents").click()
        page.get_by_role("combobox", name="Read a document").click()
        page.get_by_role("option", name="Zeppelin hangar acoustics").click()
        page.locator("#corpus-doc").get_by_role("link", name="chart").wait_for()
        assert not page.csp_errors, f"the app itself broke the policy: {page.csp_errors}"

        # Whatever slips past the page's own escaping, the browser refuses to fetch.
        image = f"document.body.insertAdjacentHTML('beforeend', '<img src=\"{base}/x\">')"
        with page.expect_console_message(lambda m: "img-src" in m.text):
            page.evaluate(image)
        assert any("img-src" in e for e in page.csp_errors), "the CSP should refuse the image"
    finally:
        app.close()
    assert hits == [], f"the browser fetched from the document's host: {hits}"


HOSTILE = [
    "![chart](http://h/a.png)",
    "![chart][ref]\n\n[ref]: http://h/b.png",
    "\\\\![chart](http://h/c.png)",  # an escaped backslash, then a real image
    '<img src="http://h/d.png">',
    '<video src="http://h/e.mp4"></video> <iframe src="http://h/f"></iframe>',
    '<p style="background: url(http://h/g.png)">styled</p>',
]


@pytest.mark.parametrize("text", HOSTILE)
def test_chat_and_reader_markdown_renders_no_remote_resource(text):
    # Rendered by a CommonMark parser with HTML on, as Gradio's Markdown does in the browser.
    from markdown_it import MarkdownIt

    turn = {"question": text, "answer": f"{text} [1]", "citations": []}
    doc = {"title": "T", "paper": None, "url": None, "text": text}
    shown = [m["content"] for m in webview.chat_messages([turn])]
    for markdown in [*shown, webview.document_markdown(doc)]:
        rendered = MarkdownIt("commonmark").render(markdown)
        assert not re.search(r"<(img|video|iframe|p style)", rendered), rendered
        assert "http://h/" in rendered, f"the address is still shown: {rendered}"


def _login(page, password: str) -> int:
    """Log in on Gradio's form as `ada`; the status of the answer to the login request."""
    page.get_by_label("username").fill("ada")
    page.get_by_label("password").fill(password)
    with page.expect_response(lambda r: r.url.endswith("/login")) as response:
        page.get_by_role("button", name="Login").click()
    return response.value.status


def _post_login(url: str, password: str, address: str = "127.0.0.1") -> httpx.Response:
    """A login from another program, from `address` (any 127.x address reaches a local server)."""
    transport = httpx.HTTPTransport(local_address=address)
    with httpx.Client(transport=transport, timeout=10) as client:
        return client.post(f"{url}login", data={"username": "ada", "password": password})


class _Clock:
    """A monotonic clock that moves only when the test says so."""

    now = 1000.0

    def __call__(self) -> float:
        return self.now


@needs_chromium
def test_password_guessing_is_refused_for_a_while_the_right_password_never(
    page, data_dir, monkeypatch
):
    clock = _Clock()
    monkeypatch.setattr(webguard, "CLOCK", clock)
    bot = Chatbot(Settings.load(env_file=None, data_dir=data_dir))
    port = free_port()
    app = web.serve(bot, port=port, auth="ada:s3cret", block=False)
    url = f"http://127.0.0.1:{port}/"
    try:
        page.goto(url)
        statuses = [_login(page, f"guess{i}") for i in range(webguard.LOGIN_ATTEMPTS)]
        assert statuses == [400] * webguard.LOGIN_ATTEMPTS, statuses
        assert "Incorrect" in page.locator("body").inner_text()
        assert "wrong passwords" in page.locator("body").inner_text(), "the form says the rule"

        guesses = [_post_login(url, f"again{i}") for i in range(25)]
        assert {r.status_code for r in guesses} == {429}, "further guesses are refused"
        assert "wait" in guesses[0].json()["detail"] and guesses[0].headers["retry-after"]
        other = "127.0.0.2"
        assert _post_login(url, "nope", other).status_code == 429, (
            "guesses for the same user from another address wait too"
        )
        assert _post_login(url, "s3cret", other).status_code == 200

        clock.now += webguard.LOGIN_COOLDOWN_MAX + 1
        assert _post_login(url, "wrong-again").status_code == 400, "after the wait: told wrong"
        assert _login(page, "s3cret") == 200, "the right password is never refused"
        page.locator("#question textarea").wait_for()
    finally:
        app.close()


def test_the_downloaded_conversation_shows_document_html_and_images_as_text():
    # A Markdown viewer renders HTML and fetches images: the export must not carry a document's
    # tags as tags, nor its Markdown images as images.
    from markdown_it import MarkdownIt

    evil = (
        '<img src="http://h/x.png" onerror="alert(1)"><script>alert(2)</script>'
        "![pixel](http://tracker.example/q.png)"
    )
    turn = {
        "question": f"What about {evil}?",
        "answer": f"Lenses focus light {evil} [1].",
        "citations": [
            {
                "n": 1,
                "title": f"Lenses {evil}",
                "paper": f"Paper {evil}",
                "url": 'https://example.org/a"><script>alert(3)</script>',
                "score": 0.9,
            }
        ],
    }
    saved = webview.conversation_markdown([turn], f"model {evil}")
    rendered = MarkdownIt("commonmark").render(saved)
    assert not re.search(r"<(img|script)", rendered), rendered
    assert rendered.count("&lt;script&gt;") >= 4, "the tags are shown as text"
    assert rendered.count("![pixel](http://tracker.example/q.png)") >= 4, "images as text"
    assert "Lenses focus light" in rendered and "https://example.org/a" in rendered
