"""The Documents tab in a real Chromium, behind a login: upload a typeset PDF, ask about it in
another open tab, follow the citation to its page, and see refused files named."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chatbot import Chatbot, Settings
from chatbot.serve.web import app as web
from tests import typeset
from tests.helpers import free_port, private_index
from tests.serve.web.test_web import ANSWERED, CHROMIUM, CHROMIUM_ARGS, TIMEOUT_MS

USER, PASSWORD = "ada", "s3cret"
QUESTION = "By how much did the lighthouse mechanism reduce the memory footprint?"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"no Debian chromium at {CHROMIUM}"),
    pytest.mark.skipif(not typeset.have_latex(), reason="pdflatex (texlive) is not installed"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """The typeset paper and a scan, under the names a user would pick."""
    folder = tmp_path_factory.mktemp("picked")
    paper = typeset.compile_latex(typeset.paper_source(), folder / "tex", "lighthouse")
    named = folder / "Lighthouse paper (final).pdf"
    named.write_bytes(paper.read_bytes())
    return {
        "paper": named,
        "page": Path(str(typeset.label_pages(paper)["fact"])),
        "scan": typeset.scanned_pdf(folder / "scan.pdf"),
        "locked": typeset.text_pdf(folder / "locked.pdf", ["Secret"], password="pw"),
        "bomb": typeset.bomb_pdf(folder / "bomb.pdf"),
        "truncated": _write(folder / "truncated.pdf", paper.read_bytes()[:5000]),
        "html": _write(folder / "saved-page.pdf", b"<!doctype html><html>Sign in</html>"),
    }


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def server(built_index, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """The app behind a login, over a private copy of the index."""
    data = private_index(built_index, tmp_path_factory, "webdocs")
    bot = Chatbot(Settings.load(env_file=None, data_dir=data))
    port = free_port()
    app = web.serve(bot, port=port, auth=f"{USER}:{PASSWORD}", block=False)
    yield f"http://127.0.0.1:{port}/", data
    app.close()


@pytest.fixture(scope="module")
def context():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        ctx = browser.new_context(viewport={"width": 1280, "height": 800})
        ctx.set_default_timeout(TIMEOUT_MS)
        yield ctx
        browser.close()


def _login(page, url: str) -> None:
    page.goto(url)
    page.locator("input[type='text']").first.fill(USER)
    page.locator("input[type='password']").fill(PASSWORD)
    page.locator("input[type='password']").press("Enter")
    page.wait_for_function(
        "document.querySelector('#model-indicator')?.innerText.includes('Index:')"
    )


def test_upload_a_pdf_ask_in_another_tab_and_open_the_cited_page(server, context, files):
    url, data = server
    other = context.new_page()
    _login(other, url)  # open before the upload: it must answer from the new paper too
    page = context.new_page()
    page.goto(url)
    page.wait_for_function(
        "document.querySelector('#model-indicator')?.innerText.includes('Index:')"
    )
    page.get_by_role("tab", name="Documents").click()
    limits = page.locator("#upload-limits").inner_text()
    assert "10 files" in limits and "MB" in limits, f"limits are stated up front: {limits}"

    bad = ["scan", "locked", "bomb", "truncated", "html"]
    page.locator("#upload input[type='file']").set_input_files(
        [files["paper"], *(files[k] for k in bad)]
    )
    notes = page.locator("#upload-result")
    notes.get_by_text("Indexed:").wait_for(timeout=120_000)
    said = notes.inner_text()
    assert "Lighthouse-paper-final.pdf" in said, f"the upload is named as saved: {said}"
    assert "scan.pdf: has no text layer" in said and "OCR is not supported" in said, said
    for name, reason in [
        ("locked.pdf", "is encrypted"),
        ("bomb.pdf", "decompression bomb"),
        ("truncated.pdf", "is truncated"),
        ("saved-page.pdf", "is not a PDF"),
    ]:
        line = next((x for x in said.splitlines() if x.startswith(f"{name}: ")), "")
        assert reason in line, f"{name} should be named with {reason!r}: {said}"
    kept = sorted(p.name for p in (data / "uploads").iterdir())
    assert kept == ["Lighthouse-paper-final.pdf"], f"only the good file is kept, renamed: {kept}"
    listing = page.locator("#corpus-list")
    listing.get_by_text("Sparse Lighthouse Attention").wait_for()
    row = listing.locator("tr", has_text="Sparse Lighthouse Attention").inner_text()
    import pypdfium2

    pages = len(pypdfium2.PdfDocument(files["paper"]))
    assert f"PDF, {pages} pages" in row, f"the list gives the PDF's pages: {row}"

    other.locator("#question textarea").fill(QUESTION)
    other.locator("#question textarea").press("Enter")
    other.wait_for_function(ANSWERED, arg=1, timeout=120_000)
    other.locator("#chat a[href^='#src-1-']").first.click()
    card = other.locator("#sources .source.target")
    card.wait_for()
    page_no = files["page"].name
    link = card.locator("a.page-link")
    assert link.inner_text() == f"p. {page_no}", f"the card names the page: {card.inner_text()}"
    href = link.get_attribute("href") or ""
    assert href.endswith(f"#page={page_no}"), f"the link opens the PDF at its page: {href}"
    mark = card.locator("mark").first
    assert "73 percent" in mark.inner_text(), "the supporting sentence is highlighted"

    with context.expect_page() as opened:
        link.click()  # a new tab, with Chromium's PDF viewer at the page
    viewer = opened.value
    viewer.wait_for_load_state()
    assert viewer.url.endswith(f"#page={page_no}"), f"the PDF opens at its page: {viewer.url}"
    kind = viewer.evaluate("document.contentType")
    assert kind == "application/pdf", f"the new tab shows the PDF itself, not {kind}"
    viewer.close()
    served = other.request.get(url + href.split("#")[0])
    assert served.status == 200 and served.headers["content-type"] == "application/pdf"
    assert served.body()[:5] == b"%PDF-", "the app serves the uploaded PDF itself"
    anonymous = context.browser.new_context()
    try:
        refused = anonymous.request.get(url + href.split("#")[0])
        assert refused.status in (401, 403), f"without the login the PDF is refused: {refused}"
    finally:
        anonymous.close()

    choice = page.locator("#delete-pick input")
    choice.click()
    page.locator("li", has_text="Sparse Lighthouse Attention for Long Documents").first.click()
    page.locator("#delete-doc").click()
    notes.get_by_text("Deleted:").wait_for()
    assert not (data / "uploads" / "Lighthouse-paper-final.pdf").exists(), "the file goes too"
    page.wait_for_function(
        "!document.querySelector('#corpus-list')?.innerText.includes('Sparse Lighthouse')"
    )
