"""The web UI's own style sheet and page scripts, read from `assets/` (shipped in the wheel).

- `style.css`: the page's styles.
- `page.js`, run once when the page loads: `[n]` in an answer shows that answer's sources and
  source n within the sources panel's own scroll box, the sentence(s) backing that marker lit up
  in the card (the link names their spans: `#src-1-2:0,3`); the page itself moves only when the
  panel is off screen (on a phone it sits below the chat, and a link at the panel's top leads back
  to the answer). Links picking an answer's sources show its section. The quote of `[n]` and the
  reason for ⚠ show in one tooltip of the page's own: on hover, on keyboard focus, or on a tap of
  ⚠; never after a click on `[n]`, whose source the panel then shows. Native titles are moved
  aside (they cannot be dismissed), and each message is labelled with its text rather than its
  Markdown.
- `submit.js`, on Enter or Send: the question moves from the box into the chat (`submit_js`).
- `save.js`: saves the conversation file the server made on request ({name, text}) from the page
  itself.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files


@cache
def _read(name: str) -> str:
    return (files(__package__) / "assets" / name).read_text(encoding="utf-8")


CSS = _read("style.css")
JS = _read("page.js")
SAVE_JS = _read("save.js")


def submit_js(limit: int) -> str:
    """The page's own step on Enter or Send: the question moves from the box into the chat.

    Gives the box (emptied, but for what was typed since), the question for the server ("" when
    none is sent), the chat and the counter.
    Nothing is sent while an answer is written (Stop shows) or when the question is over `limit`
    characters: it stays in the box, and the counter says why. The question is shown inert, as
    the server shows it (view.inert).
    """
    return _read("submit.js").replace("__LIMIT__", str(int(limit)))
