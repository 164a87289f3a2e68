"""Ingestion: incremental by content, bad files reported, interruptions recovered."""

from __future__ import annotations

import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from chatbot import Chatbot, Settings
from chatbot.index.embeddings.minilm import MiniLMEmbeddings
from chatbot.index.store import embed_text, to_passage
from chatbot.index.sync import BATCH, FIRST_BATCH
from chatbot.text.sentences import split_sentences
from tests.conftest import CORPUS, ROOT, SHARED, needs_shared
from tests.helpers import cli_env, run_cli


def test_reingesting_the_unchanged_corpus_embeds_nothing_and_says_so(data_dir):
    result = run_cli(data_dir, "ingest")
    assert result.returncode == 0, result.stderr
    assert "0 added, 0 updated, 20 unchanged" in result.stdout


def test_edited_file_replaces_its_passages_and_a_removed_file_loses_them(tmp_path, capfd):
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    bot = Chatbot(Settings.load(env_file=None, data_dir=tmp_path / "data", corpus_dir=corpus))
    assert bot.ingest().added == 20

    edited = corpus / "16-combinatorial-auctions.md"
    edited.write_text(
        edited.read_text("utf-8").replace("spectrum licenses", "orbital slot permits"), "utf-8"
    )
    (corpus / "17-long-form-speech.md").unlink()
    capfd.readouterr()
    report = bot.ingest(progress=True)
    assert (report.added, report.updated, report.unchanged, report.removed) == (0, 1, 18, 1)
    # Only the edited document's sentences are embedded again, not the whole corpus's.
    embedded = re.findall(r"sentences: (\d+) sentences", capfd.readouterr().err)
    edited_sentences = len({s for p in report.written for s in split_sentences(p)})
    assert embedded and int(embedded[-1]) == edited_sentences > 0, (embedded, edited_sentences)

    texts = bot.store.all_passages()[1]
    assert not any("spectrum licenses" in t for t in texts), "the old version must be gone"
    assert sum("orbital slot permits" in t for t in texts) == 1, "the new version is indexed once"
    assert "long-form-speech" not in bot.store.documents()
    top = bot.retrieve("Who auctions orbital slot permits?", k=1)[0]
    assert top.doc_id == "combinatorial-auctions", "the keyword index follows the edit"


@pytest.mark.slow
def test_bad_files_are_named_the_rest_is_ingested_and_the_exit_code_is_nonzero(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    (corpus / "latin1.md").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (corpus / "empty.txt").write_text("  \n", "utf-8")
    (corpus / "broken.md").write_text("---\ntitle: no end\n\nText", "utf-8")
    (corpus / "dup.md").write_text("---\nid: ensemble-illusion\n---\nAnother text.", "utf-8")
    result = run_cli(tmp_path / "data", "ingest", str(corpus))
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    for name, reason in [
        ("latin1.md", "not UTF-8"),
        ("empty.txt", "empty"),
        ("broken.md", "never closed"),
        ("dup.md", "already used"),
    ]:
        assert any(name in line and reason in line for line in lines), (name, result.stderr)
    assert "Traceback" not in result.stderr
    assert "20 added" in result.stdout, "the good files are still ingested"


def _abstract_corpus(folder, n: int, words: int | None = None) -> None:
    """`n` ICML abstracts as Markdown files; with `words`, only each abstract's opening words."""
    folder.mkdir()
    source = SHARED / "data" / "icml_2020_2023_abstracts.jsonl"
    with source.open(encoding="utf-8") as lines:
        for i, line in zip(range(n), lines, strict=False):
            rec = json.loads(line)
            head = f"---\nid: {rec['id']}\ntitle: {json.dumps(rec['title'])}\n---\n"
            text = rec["abstract"] if words is None else " ".join(rec["abstract"].split()[:words])
            body = head + text
            (folder / f"{i:04d}.md").write_text(body, "utf-8")


def _cached_vectors(data_dir) -> int:
    try:
        with sqlite3.connect(data_dir / "embedding-cache.sqlite", timeout=1) as db:
            return db.execute("SELECT count(*) FROM vectors").fetchone()[0]
    except sqlite3.Error:
        return 0


def _start_ingest(corpus, data):
    return subprocess.Popen(
        [sys.executable, "-m", "chatbot", "ingest", str(corpus)],
        cwd=ROOT,
        env=cli_env(data),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True  # exited; only its parent's record of it is left
        time.sleep(0.1)
    return False


def _interrupt_after(proc, data, vectors: int, sig) -> tuple[int, str, list[int]]:
    """Signal the ingest once `vectors` are cached; its exit code, stderr and child processes."""
    deadline = time.monotonic() + 240
    while _cached_vectors(data) < vectors and proc.poll() is None:
        assert time.monotonic() < deadline, "ingest made no progress"
        time.sleep(0.05)
    children = _children(proc.pid)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err, children


# One passage each (the opening 40 words of an abstract), so a batch embeds in about 3 s.
ABSTRACTS, WORDS = 900, 40


@pytest.mark.slow
@needs_shared("data", "icml_2020_2023_abstracts.jsonl")
def test_interrupted_ingest_is_completed_by_the_next_without_duplicates(tmp_path):
    corpus, data = tmp_path / "abstracts", tmp_path / "data"
    # Stopped once its first batch is embedded (at most a further BATCH cached by then), the
    # second run, too, has more than 2 * BATCH passages left and embeds in a child process.
    _abstract_corpus(corpus, ABSTRACTS, WORDS)

    # Stopped after the first batch, then killed a batch or two later, mid-way.
    code, err, children = _interrupt_after(
        _start_ingest(corpus, data), data, FIRST_BATCH, signal.SIGINT
    )
    assert code == 130, f"Ctrl-C should end with 130, got {code}: {err}"
    assert "interrupted" in err and "Traceback" not in err
    assert children, "an ingest this large embeds in a child process"
    assert all(_gone(pid, within=5) for pid in children), "Ctrl-C stops the embedding process too"

    code, err, children = _interrupt_after(
        _start_ingest(corpus, data), data, 2 * BATCH, signal.SIGKILL
    )
    assert code == -signal.SIGKILL, "the second run must really be killed mid-way"
    # The child dies with its parent (tests/test_faults_process.py times it: under 2 s).
    assert children and all(_gone(pid, within=60) for pid in children), "no orphan keeps running"

    finished = run_cli(data, "ingest", str(corpus))
    assert finished.returncode == 0, finished.stderr
    bot = Chatbot(Settings.load(env_file=None, data_dir=data))
    docs = bot.store.documents()
    assert len(docs) == ABSTRACTS and all(d.complete for d in docs.values()), "every doc whole"
    metas = bot.store.all_passages()[2]
    keys = [(m["doc_id"], m["chunk"]) for m in metas]
    assert len(keys) == len(set(keys)), "no passage is stored twice"

    again = run_cli(data, "ingest", str(corpus))
    assert f"0 added, 0 updated, {ABSTRACTS} unchanged" in again.stdout

    # What the child process computed is what this process's model computes.
    got = bot.store.collection.get(limit=5, include=["documents", "metadatas", "embeddings"])
    passages = [to_passage(*row) for row in zip(got["ids"], got["documents"], got["metadatas"])]
    expected = MiniLMEmbeddings().encode([embed_text(p) for p in passages])
    assert np.abs(np.asarray(got["embeddings"]) - expected).max() < 1e-5


@pytest.mark.slow
def test_another_process_ingesting_is_seen_by_a_running_bot(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    data = tmp_path / "data"
    bot = Chatbot(Settings.load(env_file=None, data_dir=data, corpus_dir=corpus))
    bot.ingest()
    assert bot.retrieve("zeppelin hangar acoustics", k=1)[0].doc_id != "zeppelins"
    (corpus / "zeppelins.md").write_text(
        "---\nid: zeppelins\n---\nZeppelin hangar acoustics echo for seconds.", "utf-8"
    )
    result = run_cli(data, "ingest", str(corpus), CHATBOT_CORPUS_DIR=str(corpus))
    assert "1 added" in result.stdout, result.stderr
    # This process's dense index has not seen it; only the keyword index, read again, can find it.
    found = [p.doc_id for p in bot.retrieve("zeppelin hangar acoustics", k=3)]
    assert "zeppelins" in found, "the keyword index follows changes made by another process"


def test_a_rebuild_takes_every_vector_from_the_cache(data_dir):
    bot = Chatbot(Settings.load(env_file=None, data_dir=data_dir))
    before = bot.store.count()
    report = bot.ingest(rebuild=True)
    assert (report.added, report.passages, report.embedded) == (20, before, 0), report
    assert f"{before} passages written, 0 embedded, the rest from the cache" in str(report)
    assert bot.store.count() == before and bot.ask("What is generative social choice?").citations


def test_the_progress_bar_counts_documents_and_shows_rate_and_time_left(data_dir, capfd):
    bot = Chatbot(Settings.load(env_file=None, data_dir=data_dir))
    bot.ingest(rebuild=True, progress=True)
    err = capfd.readouterr().err
    # e.g. "Indexing: 100%|##########| 20/20 [00:01<00:00, 14.8doc/s]"
    assert re.search(r"Indexing: +100%.* 20/20 \[\d+:\d\d<\d+:\d\d, +[\d.]+doc/s\]", err), err
