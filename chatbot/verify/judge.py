"""The configured model as the judge of an answer: its prompt, and its verdicts read back.

`CHATBOT_SUPPORT_CHECK=model` asks the model whether each answer sentence is supported by the
passages it cites, in one extra call; a reply these functions cannot read leaves the lexical check
(`support.py`) in charge.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from chatbot.settings import PROMPTS_DIR


def load_judge_prompt(folder: Path) -> str:
    """`judge.txt` from `folder`, or the package's own when that folder has none."""
    path = folder / "judge.txt"
    if not path.is_file():
        path = PROMPTS_DIR / "judge.txt"
    return path.read_text(encoding="utf-8").strip()


def parse_verdicts(reply: str, count: int) -> list[bool] | None:
    """`count` true/false verdicts from a model's JSON reply, or None when it gives no such list."""
    match = re.search(r"\[[^\[\]]*\]", reply)
    if not match:
        return None
    try:
        verdicts = json.loads(match.group(0))
    except ValueError:
        return None
    if len(verdicts) != count or not all(isinstance(v, bool) for v in verdicts):
        return None
    return verdicts
