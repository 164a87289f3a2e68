"""The web UI's rough edges, each seen in a real Chromium at desktop and phone sizes."""

# The fixtures come from test_web, imported by name: pytest finds them, ruff sees redefinitions.
# ruff: noqa: F811

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator

import pytest

from chatbot.answer import citations
from chatbot.serve.web import cite as webcite
from chatbot.serve.web import view as webview
from chatbot.values import Passage
from chatbot.verify import support
from tests.serve.web.test_web import (  # noqa: F401  (fixtures: pytest finds them by name in this module)
    ANSWERED,
    CHROMIUM_ARGS,
    IN_VIEW,
    OUTPUT,
    QUESTION,
    TIMEOUT_MS,
    _OpenAIHandler,
    _UncitedHandler,
    browser,
    needs_chromium,
    open_app,
    serve_with_model,
    server,
    web_data,
)
from tests.serve.web.test_web import ask as ask_and_wait

SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
LONG_ANSWER = " ".join(f"Agent benchmarks miss deployment need number {i} [1]." for i in range(12))


def new_page(browser, size: str):
    """A fresh page at one of SIZES; the phone one is touch-driven, as a phone is."""
    width, height = SIZES[size]
    phone = size == "phone"
    context = browser.new_context(
        viewport={"width": width, "height": height}, is_mobile=phone, has_touch=phone
    )
    context.set_default_timeout(TIMEOUT_MS)
    return context, context.new_page()


@pytest.fixture(params=list(SIZES))
def sized(request, browser):
    """A page at 1280×800, then at 390×844."""
    context, pg = new_page(browser, request.param)
    yield pg
    context.close()


@pytest.fixture
def desktop(browser):
    context, pg = new_page(browser, "desktop")
    yield pg
    context.close()


@pytest.fixture
def phone(browser):
    context, pg = new_page(browser, "phone")
    yield pg
    context.close()


class _HeldHandler(_OpenAIHandler):
    """Writes LONG_ANSWER's first words, then holds the rest until `release` is set."""

    release = threading.Event()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": body["model"]}
        try:
            for i, word in enumerate(LONG_ANSWER.split(" ")):
                if i == 20:  # after 'number 1 [1].'
                    self.release.wait(TIMEOUT_MS / 1000)
                delta = {"role": "assistant", "content": word + " "}
                chunk = {**base, "choices": [{"index": 0, "delta": delta}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
        except OSError:  # the client hung up
            pass


@pytest.fixture(scope="module")
def uncited_server(web_data) -> Iterator[str]:
    """The app with a model that answers without citing anything."""
    with serve_with_model(web_data, _UncitedHandler) as (url, _):
        yield url


@pytest.fixture(scope="module")
def held_server(web_data) -> Iterator[str]:
    """The app with a model that writes a few words, then waits for `_HeldHandler.release`."""
    with serve_with_model(web_data, _HeldHandler) as (url, _):
        try:
            yield url
        finally:
            _HeldHandler.release.set()


def start_held_answer(page) -> None:
    """Ask the held model and wait until its first words are on the page."""
    _HeldHandler.release = threading.Event()
    page.locator("#question textarea").fill(QUESTION)
    page.locator("#question textarea").press("Enter")
    page.wait_for_function(
        "(document.querySelector(\"#chat [data-testid='bot']\")?.innerText || '')"
        ".includes('number 1')"
    )


def shot(page, name: str) -> None:
    OUTPUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUTPUT / f"{name}.png"))


def hold_questions(page) -> list:
    """Hold every question the page sends to the server until the returned routes are resumed."""
    held: list = []
    page.route("**/gradio_api/queue/join*", lambda route: held.append(route))
    return held


def release_questions(page, held: list) -> None:
    for route in held:
        route.continue_()
    page.unroute("**/gradio_api/queue/join*")


# 1. A new question and its answer come into view even when the chat was scrolled up.
VISIBLE_IN_CHAT = """el => { const box = document.querySelector('#chat .bubble-wrap')
        .getBoundingClientRect(); const r = el.getBoundingClientRect();
        const top = Math.max(box.top, 0), bottom = Math.min(box.bottom, window.innerHeight);
        return r.height > 0 && r.top >= top - 1 && r.top + 20 <= bottom + 1; }"""


EARLIER_QUESTIONS = (
    "What is optimal transport?",
    "How can collectives influence AI platforms?",
    "What is generative social choice?",
    "How do sparse decision trees stay interpretable?",
    "What is optimal transport used for?",
    "Do AI agent benchmarks reflect reality?",
)


@needs_chromium
def test_a_new_question_and_its_answer_come_into_view_when_the_chat_was_scrolled_up(sized, server):
    open_app(sized, server)
    overflowing = (
        "() => { const b = document.querySelector('#chat .bubble-wrap');"
        " return b.scrollHeight > b.clientHeight + 100; }"
    )
    # Ask until the chat holds more than it shows (answers are short: one may not be enough).
    asked = 0
    for q in EARLIER_QUESTIONS:
        ask_and_wait(sized, q)
        asked += 1
        if sized.evaluate(overflowing):
            break
    assert sized.evaluate(overflowing), f"{asked} answers should overflow the chat: ask more"
    sized.evaluate("document.querySelector('#chat .bubble-wrap').scrollTop = 0")
    ask_and_wait(sized, QUESTION)
    question = sized.locator("#chat [data-testid='user']").nth(asked)
    answer = sized.locator("#chat [data-testid='bot']").nth(asked)
    shown = [question.evaluate(VISIBLE_IN_CHAT), answer.evaluate(VISIBLE_IN_CHAT)]
    shot(sized, f"web-ui-scrolled-{sized.viewport_size['width']}")
    assert shown == [True, True], (
        f"the new question and its answer should be in view (shown: {shown}), "
        "not below a chat the user had scrolled up"
    )


# 2. An answer that cites nothing is not said to be outside the papers.
@needs_chromium
def test_an_uncited_answer_shows_what_it_was_given_instead_of_saying_the_papers_miss_it(
    desktop, uncited_server
):
    open_app(desktop, uncited_server)
    ask_and_wait(desktop, QUESTION)
    panel = desktop.locator("#sources .answer-sources:not([hidden])")
    text = panel.inner_text()
    assert "do not cover" not in text, f"the answer was written, not abstained from: {text}"
    assert "cites none" in text, f"the panel should say the answer cites no passage: {text}"
    assert panel.locator(".source").count() >= 1, "the passages the model was given should show"
    shot(desktop, "web-ui-uncited-desktop")


def test_an_abstention_still_says_the_papers_do_not_cover_the_question():
    turn = {"question": "q", "answer": "The corpus does not answer this question."}
    turn |= {"citations": [], "abstained": True, "retrieved": []}
    assert "do not cover this question" in webview.sources_html([turn])


# 3. ⚠ is explained on touch, by keyboard and in a legend.
@needs_chromium
def test_the_warning_flag_is_explained_on_tap_by_keyboard_and_in_a_legend(
    phone, desktop, uncited_server
):
    open_app(phone, uncited_server)
    ask_and_wait(phone, QUESTION)
    tip = phone.locator("#quote-tip")
    phone.locator("#chat .unsupported").first.tap()
    tip.wait_for(state="visible")
    assert "Cites no source" in tip.inner_text(), f"a tap on ⚠ should say why: {tip.inner_text()}"
    shot(phone, "web-ui-flag-phone")
    legend = phone.locator("#sources .answer-sources:not([hidden]) .flags")
    assert legend.count() == 1, "the sources of a flagged answer should explain its ⚠"
    assert "cites no source" in legend.inner_text().lower(), legend.inner_text()
    assert "deployments need" in legend.inner_text(), "the legend should name the sentence"

    open_app(desktop, uncited_server)
    ask_and_wait(desktop, QUESTION)
    desktop.locator("#question textarea").focus()
    for _ in range(40):  # Tab backwards from the box until the flag has focus
        desktop.keyboard.press("Shift+Tab")
        if desktop.evaluate("document.activeElement.classList.contains('unsupported')"):
            break
    assert desktop.evaluate("document.activeElement.classList.contains('unsupported')"), (
        "Tab should reach the ⚠"
    )
    desktop.locator("#quote-tip").wait_for(state="visible")
    assert "Cites no source" in desktop.locator("#quote-tip").inner_text()


# 4. The quote preview goes away once [n] is clicked or tapped, and covers no source card.
@needs_chromium
def test_the_quote_preview_goes_once_a_citation_is_clicked_or_tapped(desktop, phone, server):
    open_app(desktop, server)
    ask_and_wait(desktop, QUESTION)
    link = desktop.locator("#chat [data-testid='bot']").first.get_by_role("link", name="[1]")
    tip = desktop.locator("#quote-tip")
    assert link.first.get_attribute("title") is None, (
        "a native title tooltip cannot be dismissed: the quote should show in the page's own"
    )
    link.last.hover()
    tip.wait_for(state="visible")
    box, chat = tip.bounding_box(), desktop.locator("#chat").bounding_box()
    assert box["x"] + box["width"] <= chat["x"] + chat["width"] + 1, (
        "the preview should stay over the chat, not cover the sources"
    )
    link.last.click()
    desktop.locator("#sources .source.target").wait_for()
    tip.wait_for(state="hidden")

    open_app(phone, server)
    ask_and_wait(phone, QUESTION)
    phone.locator("#chat [data-testid='bot']").first.get_by_role("link", name="[1]").last.tap()
    phone.locator("#sources .source.target").wait_for()
    assert not phone.locator("#quote-tip").is_visible(), "a tapped [n] should leave no preview"


# 5. Keys typed right after Enter are kept.
@needs_chromium
def test_what_is_typed_right_after_enter_stays_in_the_box(desktop, server):
    open_app(desktop, server)
    box = desktop.locator("#question textarea")
    held = hold_questions(desktop)
    box.fill(QUESTION)
    box.press("Enter")
    desktop.keyboard.type("Which")  # while the question is on its way to the server
    release_questions(desktop, held)
    desktop.wait_for_function(ANSWERED, arg=1)
    assert box.input_value() == "Which", f"typing after Enter was lost: {box.input_value()!r}"
    asked = desktop.locator("#chat [data-testid='user']").all_inner_texts()
    assert [a.strip() for a in asked] == [QUESTION], f"keys typed after Enter were sent: {asked}"


# 6. Each [n] previews and highlights the sentence backing the sentence it follows.
@needs_chromium
def test_each_citation_previews_and_highlights_the_sentence_it_backs(desktop, server, bot):
    question, expected = next(
        (
            (q, a)
            for q in (QUESTION, *EARLIER_QUESTIONS)
            if (a := bot.ask(q)).text.count("[1]") >= 2
            and a.citations
            and len(a.citations[0].spans) >= 2
        ),
        (None, None),
    )
    assert expected, "none of the questions is answered citing [1] twice: pick another"
    source = expected.citations[0]
    sentences = [source.text[a:b] for a, b in source.spans]
    open_app(desktop, server)
    ask_and_wait(desktop, question)
    links = desktop.locator("#chat [data-testid='bot']").first.get_by_role("link", name="[1]")
    tip = desktop.locator("#quote-tip")
    for i, sentence in enumerate(sentences):
        links.nth(i).hover()
        desktop.wait_for_function(
            "t => document.querySelector('#quote-tip:not([hidden])')?.innerText.includes(t)",
            arg=sentence[:60],
        )
        others = [s for s in sentences if s != sentence]
        assert not any(o[:40] in tip.inner_text() for o in others), (
            f"[1] number {i + 1} should preview its own sentence only: {tip.inner_text()}"
        )
        links.nth(i).click()
        desktop.wait_for_function(
            "t => [...document.querySelectorAll('#sources .source.target mark.current')]"
            ".map(m => m.textContent).join(' ').includes(t)",
            arg=sentence[:60],
        )
        lit = desktop.locator("#sources .source.target mark.current").all_text_contents()
        assert not any(o[:40] in " ".join(lit) for o in others), f"only its sentence: {lit}"
        colours = desktop.evaluate(
            "() => [...document.querySelectorAll('#sources .source.target mark')]"
            ".map(m => [m.classList.contains('current'), getComputedStyle(m).backgroundColor])"
        )
        lit_colours = {c for current, c in colours if current}
        unlit_colours = {c for current, c in colours if not current}
        assert lit_colours and not lit_colours & unlit_colours, (
            f"the backing sentence should stand out from the source's other quotes: {colours}"
        )
    shot(desktop, "web-ui-citation-desktop")


def test_each_marker_shows_what_the_evidence_step_found_for_its_own_sentence():
    animals = Passage("a", "animals", "Animals", "Cats purr when calm. Dogs bark. Birds sing.", 1.0)
    owls = Passage("o", "owls", "Owls", "Owls hunt at night.", 0.9)
    answer = "Birds sing [1][2]. Cats purr when they are calm [1]."
    found = support.evidence(answer, [animals, owls])
    cited = citations.cite(answer, [animals, owls], None, found.spans, found.backing)
    evidence = webcite.marker_evidence(answer, [c.to_dict() for c in cited])
    assert [(e.n, e.quote) for e in evidence] == [
        (1, "Birds sing."),
        (2, "Owls hunt at night."),
        (1, "Cats purr when calm."),
    ], "each marker previews the sentence its own claim was checked against"
    for e, (start, spans) in zip(
        evidence, [*found.backing[1][:1], *found.backing[2], *found.backing[1][1:]], strict=True
    ):
        text = animals.text if e.n == 1 else owls.text
        assert e.quote == " ".join(text[a:b] for a, b in spans), (start, e)
    link = webcite.linkify("Birds sing [1].", 3, evidence[:1])
    assert link == 'Birds sing [[1]](#src-3-1:1 "Birds sing.").', link
    bare = webcite.marker_evidence("A claim [1].", [{"n": 1, "text": "x", "quote": ""}])
    assert webcite.linkify("A claim [1].", 1, bare) == "A claim [[1]](#src-1-1).", (
        "a citation without spans has nothing to preview or light up"
    )


# 7. A long pasted question is kept, counted on screen and refused with a reason.
@needs_chromium
def test_a_long_pasted_question_is_kept_counted_in_view_and_not_sent(sized, server):
    open_app(sized, server)
    box = sized.locator("#question textarea")
    box.focus()
    sized.keyboard.insert_text("Why do agents fail? " * 125)  # 2,500 characters
    assert len(box.input_value()) == 2500, "a pasted question should not be cut silently"
    counter = sized.locator("#question-count")
    sized.wait_for_function("document.querySelector('#question-count').innerText.includes('2,500')")
    assert "500 over" in counter.inner_text(), (
        f"the counter should say by how much: {counter.inner_text()}"
    )
    sized.wait_for_function(IN_VIEW, arg=counter.element_handle())
    box.press("Enter")
    sized.wait_for_function(
        "() => document.querySelector('#question-count').innerText.includes('shorten')"
    )
    assert len(box.input_value()) == 2500, "a refused question should stay in the box to shorten"
    assert sized.locator("#chat [data-testid='user']").count() == 0, "it should not be sent"
    shot(sized, f"web-ui-long-question-{sized.viewport_size['width']}")


def test_the_sources_header_shortens_a_long_question():
    question = "Why do agents fail? " * 100
    html = webview.sources_html([{"question": question, "citations": []}])
    header = re.search(r"<div class='for-question'>.*?</div>", html, re.S)[0]
    assert len(re.sub("<[^>]+>", "", header)) < 200, f"the header repeats the question: {header}"


# 8. Smaller ones.
@needs_chromium
def test_the_question_shows_at_once_before_the_server_has_it(desktop, server):
    open_app(desktop, server)
    held = hold_questions(desktop)
    desktop.locator("#question textarea").fill(QUESTION)
    desktop.locator("#question textarea").press("Enter")
    desktop.locator("#chat [data-testid='user']").get_by_text(QUESTION).wait_for()
    # Shown while every request to the server is held: the page did not wait for the server.
    # The request itself follows the page's own step; it must come, and is then let through.
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while not held:
        assert time.monotonic() < deadline, "the question never went to the server"
        desktop.wait_for_timeout(50)
    release_questions(desktop, held)
    desktop.wait_for_function(ANSWERED, arg=1)
    users = desktop.locator("#chat [data-testid='user']").all_inner_texts()
    assert [u.strip() for u in users] == [QUESTION], f"the question should show once: {users}"


@needs_chromium
def test_the_box_keeps_its_width_and_a_half_written_answer_has_no_buttons(desktop, held_server):
    open_app(desktop, held_server)
    width = desktop.locator("#question textarea").bounding_box()["width"]
    start_held_answer(desktop)
    desktop.locator("#stop").wait_for()
    assert desktop.locator("#question textarea").bounding_box()["width"] == width, (
        "the box should keep its width while Stop shows"
    )
    buttons = desktop.locator("#chat .message-row.bot-row + .message-buttons button")
    names = [b.get_attribute("aria-label") for b in buttons.all() if b.is_visible()]
    assert not names, f"a half-written answer should offer no copy or votes: {names}"
    shot(desktop, "web-ui-writing-desktop")
    _HeldHandler.release.set()
    desktop.wait_for_function(ANSWERED, arg=1)
    desktop.locator("#chat").get_by_role("button", name="Like", exact=True).wait_for()
    names = [b.get_attribute("aria-label") for b in buttons.all() if b.is_visible()]
    assert "Copy message" in names and "Like" in names, f"the finished answer's buttons: {names}"


@needs_chromium
def test_on_a_phone_icons_and_citations_are_big_enough_to_tap(phone, uncited_server, server):
    small = []
    for url in (server, uncited_server):
        open_app(phone, url)
        ask_and_wait(phone, QUESTION)
        small += phone.evaluate(
            """() => [...document.querySelectorAll('#chat button, #chat a')]
            .filter(e => e.getClientRects().length && getComputedStyle(e).visibility !== 'hidden')
            .map(e => [e.getAttribute('aria-label') || e.textContent.trim(),
                       e.getBoundingClientRect()])
            .filter(([, r]) => r.width < 44 || r.height < 44)
            .map(([n, r]) => `${n} ${Math.round(r.width)}×${Math.round(r.height)}`)"""
        )
    shot(phone, "web-ui-targets-phone")
    assert not small, f"touch targets under 44×44 px: {small}"


@needs_chromium
def test_the_model_line_names_the_server_without_linking_to_it(desktop, uncited_server):
    open_app(desktop, uncited_server)
    indicator = desktop.locator("#model-indicator")
    assert "test-model at http://127.0.0.1" in indicator.inner_text()
    assert indicator.locator("a").count() == 0, "the model server's address is not a page to visit"


@needs_chromium
def test_each_message_is_labelled_with_its_text_not_its_markup(desktop, uncited_server, server):
    for url in (server, uncited_server):
        open_app(desktop, url)
        ask_and_wait(desktop, QUESTION)
        labels = desktop.evaluate(
            "() => [...document.querySelectorAll(\"#chat [data-testid='bot'], "
            "#chat [data-testid='user']\")].map(e => e.getAttribute('aria-label'))"
        )
        raw = [x for x in labels if re.search(r"<span|\]\(#|\*\*|&lt;", x or "")]
        assert not raw, f"a screen reader would read markup: {raw}"
        assert all(x for x in labels), f"every message should keep a label: {labels}"


@needs_chromium
def test_on_a_phone_the_corpus_table_shows_every_column(phone, server):
    open_app(phone, server)
    phone.get_by_role("tab", name="Documents").click()
    phone.locator("#corpus-list tr").nth(20).wait_for()
    cut = phone.evaluate(
        """() => [...document.querySelectorAll('#corpus-list td')]
        .filter(td => td.getBoundingClientRect().right > window.innerWidth
                      || td.getBoundingClientRect().left < 0)
        .map(td => td.textContent.trim().slice(0, 30))"""
    )
    shot(phone, "web-ui-corpus-phone")
    assert not cut, f"cells cut off at the screen's edge: {cut[:5]} ({len(cut)} in all)"


# The chat API gives a gradio_client caller the sources with the answer.
def test_the_chat_api_returns_the_answer_with_its_sources(server, bot):
    from gradio_client import Client

    question = "What is optimal transport?"
    expected = bot.ask(question)
    result = Client(server, verbose=False).predict(question, api_name="/chat")
    assert isinstance(result, dict), f"the endpoint should return structured data: {result!r}"
    assert result["answer"] == expected.text, "the same answer as the library's"
    got = [(c["n"], c["doc_id"], c["title"], c["quote"]) for c in result["citations"]]
    assert got == [(c.n, c.doc_id, c.title, c.quote) for c in expected.citations], got
    assert result["abstained"] is False and "unsupported" in result, sorted(result)
