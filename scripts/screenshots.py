"""Screenshots of the real web UI for the README, at desktop and phone sizes.

    .venv/bin/python scripts/screenshots.py [--data-dir DIR] [--out docs/img] [--question Q]

Serves the app on a free local port with the offline model, asks one question in headless
Chromium (Debian's /usr/bin/chromium) and saves `web-ui.png` (1280x800) and `web-ui-phone.png`
(390x844). Run it after changing the UI so the README shows what users see.
"""

from __future__ import annotations

import argparse
import socket
import tempfile
from pathlib import Path

from chatbot import Chatbot, Settings
from chatbot.serve.web import app as web

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
QUESTION = "What is generative social choice?"
SIZES = {"web-ui.png": (1280, 800), "web-ui-phone.png": (390, 844)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shoot(url: str, out: Path, question: str = QUESTION) -> list[Path]:
    """Ask `question` at each size and save a screenshot of the page once the answer is in."""
    from playwright.sync_api import sync_playwright

    saved = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        for name, (width, height) in SIZES.items():
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(60_000)
            page.goto(url)
            page.locator("#question textarea").fill(question)
            page.locator("#question textarea").press("Enter")
            page.locator("#chat [data-testid='bot']").first.wait_for()
            # The sources panel shows retrieved passages (data-state 'pending') until the answer
            # is complete.
            page.wait_for_function(
                "document.querySelector('#sources .answer-sources')"
                " && !document.querySelector(\"#sources [data-state='pending']\")"
            )
            page.wait_for_timeout(500)  # let the last streamed piece render
            path = out / name
            page.screenshot(path=str(path))
            saved.append(path)
            page.close()
        browser.close()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="an index to use (default: a new one)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--question", default=QUESTION, help=f"what to ask (default: {QUESTION})")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bot = Chatbot(Settings.load(env_file=None, data_dir=args.data_dir or Path(tmp)))
        bot.ingest()
        port = free_port()
        app = web.serve(bot, port=port, block=False)
        try:
            args.out.mkdir(parents=True, exist_ok=True)
            for path in shoot(f"http://127.0.0.1:{port}/", args.out, args.question):
                print(path)
        finally:
            app.close()


if __name__ == "__main__":
    main()
