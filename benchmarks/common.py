"""What the benchmark scripts share: printing a result and saving it."""

from __future__ import annotations

import json
from pathlib import Path


def emit(result: dict, out: Path | None) -> None:
    """Print `result` as indented JSON, and write it to `out` when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        out.write_text(text + "\n")
