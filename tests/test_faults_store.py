"""A damaged or concurrently rebuilt keyword index: repaired from the store, with one warning."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chatbot.keyword import KeywordIndex

from .conftest import ROOT
from .helpers import cli_env, run_cli

QUESTION = "What is a combinatorial auction?"
SOURCE = "combinatorial-auctions"
BM25_FILES = (
    "ids.json",
    "params.index.json",
    "vocab.index.json",
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
)


def _truncate(path: Path) -> None:
    path.write_bytes(b"")


def _garbage(path: Path) -> None:
    path.write_bytes(random.Random(path.name).randbytes(max(path.stat().st_size, 64)))


DAMAGE = {"truncate": _truncate, "garbage": _garbage, "missing": Path.unlink}


def _keyword_folder(data_dir: Path) -> Path:
    return data_dir / "bm25" / "summaries"


def _bm25_file(data_dir: Path, name: str) -> Path:
    found = list(_keyword_folder(data_dir).rglob(name))
    assert len(found) == 1, f"expected one {name} in the keyword index, found {found}"
    return found[0]


def _cited(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, f"the question should be answered, got: {result.stderr}"
    return [c["doc_id"] for c in json.loads(result.stdout)["citations"]]


def test_the_damage_tests_cover_every_file_of_the_keyword_index(built_index):
    names = {p.name for p in (built_index / "bm25").rglob("*") if p.is_file()}
    assert names == set(BM25_FILES), "a file of the keyword index has no damage test"


@pytest.mark.parametrize("kind", DAMAGE)
@pytest.mark.parametrize("name", BM25_FILES)
def test_a_damaged_keyword_index_is_rebuilt_from_the_store_with_one_warning(data_dir, name, kind):
    DAMAGE[kind](_bm25_file(data_dir, name))

    result = run_cli(data_dir, "ask", QUESTION, "--json")

    assert SOURCE in _cited(result), "the answer should cite the auction summary"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"expected one warning line, got: {result.stderr}"
    assert "keyword index" in lines[0] and "rebuilding it from the store" in lines[0], lines[0]
    assert str(_keyword_folder(data_dir)) in lines[0], "the warning names the folder"
    meta = json.loads((_keyword_folder(data_dir) / "ids.json").read_text())
    repaired = KeywordIndex.load(_keyword_folder(data_dir), meta["revision"])
    assert repaired is not None, "the rebuilt index is saved, so the next process loads it"
    assert repaired.search("combinatorial auctions", 1), "the rebuilt index finds passages"


# Each process rebuilds and saves the keyword index, then loads what is on disk, many times.
_REBUILDER = """
import sys, time
from pathlib import Path
from chatbot import Chatbot, Settings
from chatbot.keyword import KeywordIndex

bot = Chatbot(Settings.load(env_file=None, data_dir=Path(sys.argv[1])))
retriever = bot.retriever
revision = bot.store.revision
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
failures = []
for _ in range(int(sys.argv[3])):
    try:
        retriever.rebuild_keyword_index(revision)
        if KeywordIndex.load(retriever._keyword_dir, revision) is None:
            failures.append("the saved index could not be loaded")
    except Exception as e:
        failures.append(f"{type(e).__name__}: {e}")
print("\\n".join(failures))
"""


@pytest.mark.slow
def test_three_processes_rebuilding_the_keyword_index_at_once_never_fail(data_dir):
    start = time.time() + 6  # every process has imported chromadb by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _REBUILDER, str(data_dir), str(start), "150"],
            cwd=ROOT,
            env=cli_env(data_dir),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
        assert not out.strip(), f"a rebuild or load failed while others rebuilt:\n{out}"
        assert not err.strip(), f"nothing should be reported:\n{err}"
    result = run_cli(data_dir, "ask", QUESTION, "--json")
    assert SOURCE in _cited(result) and not result.stderr, result.stderr
