"""Prompt templates: plain files in `prompts/`, loaded at run time and checked for placeholders.

The product's own folder ships inside the package (`settings.PROMPTS_DIR`);
CHATBOT_PROMPTS_DIR points at a folder of one's own with the same three files.
"""

from __future__ import annotations

import html
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from chatbot.errors import ConfigError
from chatbot.settings import PROMPTS_DIR
from chatbot.values import Passage

NO_ANSWER = "The corpus does not answer this question."

# Each template and the placeholders it must contain (and may contain nothing else).
REQUIRED = {
    "system": {"no_answer"},
    "answer": {"passages", "question", "no_answer"},
    "condense": {"history", "question"},
}


@dataclass(frozen=True)
class Prompts:
    """The three templates the chain uses."""

    system: str
    answer: str
    condense: str


def _placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


@lru_cache(maxsize=4)
def load_prompts(folder: Path = PROMPTS_DIR) -> Prompts:
    """Read and check `system.txt`, `answer.txt` and `condense.txt` from `folder`."""
    texts = {}
    for name, required in REQUIRED.items():
        path = folder / f"{name}.txt"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(
                f"Prompt file {path} cannot be read ({e.strerror}); restore it."
            ) from e
        try:
            found = _placeholders(text)
        except ValueError as e:
            raise ConfigError(f"Prompt file {path} is not a valid template: {e}.") from e
        if found != required:
            missing, extra = required - found, found - required
            raise ConfigError(
                f"Prompt file {path} must use the placeholders {sorted(required)}"
                + (f"; missing {sorted(missing)}" if missing else "")
                + (f"; unknown {sorted(extra)}" if extra else "")
                + ". Write literal braces as {{ and }}."
            )
        texts[name] = text.strip()
    return Prompts(**texts)


def escape(text: str) -> str:
    """`text` with `<` and `>` as entities: user or document text cannot open or close a tag.

    Every piece of user or document text in a prompt goes through here (passages, the question,
    the conversation), so none can end its block early or add one of its own.
    """
    return text.replace("<", "&lt;").replace(">", "&gt;")


def format_passages(passages: Sequence[Passage]) -> str:
    """Number the passages as data blocks; markup inside a passage cannot close its block."""
    blocks = []
    for n, p in enumerate(passages, 1):
        title = html.escape(p.title, quote=True)
        # Who wrote it, where and when: a question may name them ("What did Ding propose?").
        about = "".join(
            f' {key}="{html.escape(str(p.metadata[key]), quote=True)}"'
            for key in ("authors", "venue", "year")
            if p.metadata.get(key) not in (None, "")
        )
        blocks.append(f'<passage n="{n}" title="{title}"{about}>\n{escape(p.text)}\n</passage>')
    return "\n".join(blocks)


def format_history(history: Sequence[dict[str, str]]) -> str:
    """The conversation as `User:` / `Assistant:` lines for the condense prompt, escaped."""
    names = {"user": "User", "assistant": "Assistant"}
    return "\n".join(f"{names[m['role']]}: {escape(m['content'].strip())}" for m in history)
