"""Small helpers shared by tests: running the real CLI in a new process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATBOT_", "OPENAI_"))}
    env.update(CHATBOT_DATA_DIR=str(data_dir), GRADIO_ANALYTICS_ENABLED="False", **extra)
    return env


def run_cli(data_dir: Path, *args: str, input: str | None = None, timeout: float = 300, **env):
    """Run `chatbot ARGS` in a new process, as a user would, from the repository root."""
    return subprocess.run(
        [sys.executable, "-m", "chatbot", *args],
        cwd=ROOT,
        env=cli_env(data_dir, **env),
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
