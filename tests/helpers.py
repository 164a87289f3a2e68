"""Small helpers shared by tests: the real CLI in a new process, ports, copies of the index."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.conftest import ROOT


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


@contextmanager
def local_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """An HTTP server on 127.0.0.1 (a free port) answering with `handler`, closed on exit."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def ask_turns(bot, turns: list[str]):
    """The answer to the last of `turns`, the earlier ones asked for real as its conversation."""
    history: list[dict[str, str]] = []
    for turn in turns[:-1]:
        earlier = bot.ask(turn, history)
        history += [
            {"role": "user", "content": turn},
            {"role": "assistant", "content": earlier.text},
        ]
    return bot.ask(turns[-1], history)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def private_index(built_index: Path, tmp_path_factory, name: str) -> Path:
    """A copy of the built index for one test module, so what it writes stays there."""
    target = tmp_path_factory.mktemp(name) / "data"
    shutil.copytree(built_index, target)
    return target


def records_by_year(path: Path, per_year: int) -> dict[int, list[dict]]:
    """The first `per_year` records of each year in the JSON Lines file `path`."""
    by_year: dict[int, list[dict]] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            bucket = by_year.setdefault(record["year"], [])
            if len(bucket) < per_year:
                bucket.append(record)
    return by_year
