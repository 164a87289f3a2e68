"""A killed or terminated `chatbot ingest` takes its embedding process with it at once."""

from __future__ import annotations

import re
import signal
import time

import pytest

from chatbot import Chatbot, Settings
from chatbot.index.sync import BATCH
from tests.conftest import needs_shared
from tests.index.test_ingest import (
    _abstract_corpus,
    _cached_vectors,
    _children,
    _gone,
    _start_ingest,
)

# About 930 passages: four batches, so the child is still busy when the signal comes.
ABSTRACTS = 600
# The abstracts come from the shared data folder.
pytestmark = needs_shared("data", "icml_2020_2023_abstracts.jsonl")


def _busy_ingest(tmp_path, vectors: int):
    """An ingest of ABSTRACTS abstracts, once `vectors` are cached, and its embedding process.

    The ingest is large enough to embed in a child process; this waits for that child too.
    """
    corpus, data = tmp_path / "abstracts", tmp_path / "data"
    _abstract_corpus(corpus, ABSTRACTS)
    proc = _start_ingest(corpus, data)
    deadline = time.monotonic() + 120
    while _cached_vectors(data) < vectors or not _children(proc.pid):
        assert proc.poll() is None, f"the ingest ended early: {proc.communicate()[1]}"
        assert time.monotonic() < deadline, "the ingest made no progress within 120 s"
        time.sleep(0.05)
    return proc, data, _children(proc.pid)


@pytest.mark.slow
def test_a_killed_ingest_leaves_no_embedding_process_running(tmp_path):
    proc, _, children = _busy_ingest(tmp_path, BATCH)
    proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    proc.wait(timeout=10)
    # The child is mid-batch: left alone it would embed the rest of it on a core nobody uses.
    assert all(_gone(pid, within=2) for pid in children), (
        f"the embedding process outlived its killed parent by more than 2 s "
        f"({time.monotonic() - killed:.1f} s and counting)"
    )


def _documents_indexed(proc, stderr: list[str]) -> int:
    """Read the ingest's progress bar until it counts a document as indexed; that count."""
    deadline = time.monotonic() + 120
    while True:
        line = proc.stderr.read(1) if proc.poll() is None else ""
        stderr.append(line)
        counts = re.findall(rf"(\d+)/{ABSTRACTS}", "".join(stderr[-200:]))
        if counts and int(counts[-1]) > 0:
            return int(counts[-1])
        assert line, f"the ingest ended early: {''.join(stderr)}"
        assert time.monotonic() < deadline, "the ingest wrote nothing within 120 s"


@pytest.mark.slow
def test_sigterm_ends_an_ingest_cleanly_and_keeps_what_was_written(tmp_path):
    proc, data, children = _busy_ingest(tmp_path, 0)
    stderr: list[str] = []
    indexed = _documents_indexed(proc, stderr)
    proc.send_signal(signal.SIGTERM)
    terminated = time.monotonic()
    stderr.append(proc.communicate(timeout=30)[1])
    err = "".join(stderr)
    assert proc.returncode == 128 + signal.SIGTERM, f"expected exit code 143: {proc.returncode}"
    finish = "chatbot --collection summaries ingest "
    assert "interrupted" in err and finish in err, f"the exact command that finishes: {err!r}"
    assert "Traceback" not in err, err
    assert all(_gone(pid, within=2) for pid in children), (
        f"the embedding process outlived the terminated ingest "
        f"({time.monotonic() - terminated:.1f} s)"
    )
    # A document cut short is not whole and the next ingest writes it again; those the bar
    # counted were written whole and stay.
    docs = Chatbot(Settings.load(env_file=None, data_dir=data)).store.documents()
    whole = sum(d.complete for d in docs.values())
    assert whole >= indexed, f"the {indexed} documents the bar counted are kept: {whole}"
