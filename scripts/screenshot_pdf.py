"""Screenshots of adding a PDF in the web UI, for the README, at desktop and phone sizes.

    .venv/bin/python scripts/screenshot_pdf.py [--out docs/img]

Typesets the test paper (pdflatex), serves the app over a fresh index of the bundled summaries,
uploads the paper (and a scan, to show a refused file) in headless Chromium (Debian's
/usr/bin/chromium), asks about it and saves `documents.png` (the Documents tab after the upload)
and `pdf-source.png` (the answer with the source card naming its page), each at 1280x800 and,
with `-phone` in the name, 390x844.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chatbot import Chatbot, Settings  # noqa: E402
from chatbot.serve.web import app as web  # noqa: E402
from scripts.screenshots import ARGS, CHROMIUM, free_port  # noqa: E402
from tests import typeset  # noqa: E402

QUESTION = "By how much did the lighthouse mechanism reduce the memory footprint?"
SIZES = {"": (1280, 800), "-phone": (390, 844)}


def shoot(url: str, paper: Path, scan: Path, out: Path) -> list[Path]:
    """Upload, ask and save the screenshots at each size."""
    from playwright.sync_api import sync_playwright

    saved = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        for suffix, (width, height) in SIZES.items():
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(120_000)
            page.goto(url)
            page.wait_for_function(
                "document.querySelector('#model-indicator')?.innerText.includes('Index:')"
            )
            page.get_by_role("tab", name="Documents").click()
            page.locator("#upload input[type='file']").set_input_files([paper, scan])
            page.locator("#upload-result").get_by_text("Indexed:").wait_for()
            page.locator("#corpus-list").get_by_text("Sparse Lighthouse").wait_for()
            page.locator("#delete-pick input").wait_for()  # the list of uploads is refreshed
            # The notes, the delete action and the top of the list, with the new PDF in it.
            page.evaluate("document.querySelector('#upload-limits').scrollIntoView()")
            saved.append(out / f"documents{suffix}.png")
            page.screenshot(path=str(saved[-1]))
            page.get_by_role("tab", name="Chat").click()
            page.locator("#question textarea").fill(QUESTION)
            page.locator("#question textarea").press("Enter")
            page.wait_for_function(
                "document.querySelector('#sources .answer-sources')"
                " && !document.querySelector(\"#sources [data-state='pending']\")"
            )
            page.locator("#chat a[href^='#src-1-']").first.click()
            page.locator("#sources .source.target a.page-link").wait_for()
            page.mouse.move(0, 0)  # no tooltip over the card: neither hover nor focus
            page.evaluate("document.activeElement?.blur()")
            page.locator("#quote-tip").wait_for(state="hidden")
            saved.append(out / f"pdf-source{suffix}.png")
            page.screenshot(path=str(saved[-1]))
            page.close()
        browser.close()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        pdf = typeset.compile_latex(typeset.paper_source(), work / "tex", "lighthouse")
        paper = work / "Lighthouse paper.pdf"
        paper.write_bytes(pdf.read_bytes())
        scan = typeset.scanned_pdf(work / "scanned-notes.pdf")
        bot = Chatbot(Settings.load(env_file=None, data_dir=work / "data"))
        bot.ingest(progress=False)
        port = free_port()
        app = web.serve(bot, port=port, block=False)
        try:
            for path in shoot(f"http://127.0.0.1:{port}/", paper, scan, args.out):
                print(path)
        finally:
            app.close()


if __name__ == "__main__":
    main()
