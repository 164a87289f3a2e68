"""A damaged, concurrently rebuilt or read-only index: repaired, or one line saying what to do."""

from __future__ import annotations

import json
import logging
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chatbot import Chatbot, Settings
from chatbot.index.bm25 import KeywordIndex
from tests.conftest import ROOT
from tests.helpers import cli_env, run_cli

QUESTION = "What is a combinatorial auction?"
SOURCE = "combinatorial-auctions"


def rebuild_command(data_dir) -> str:
    """The start of the command the damaged-store message gives: data folder and collection."""
    return f"chatbot --data-dir {data_dir} --collection summaries ingest --rebuild"


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
def test_a_damaged_keyword_index_is_rebuilt_from_the_store_with_one_warning(
    data_dir, name, kind, caplog
):
    DAMAGE[kind](_bm25_file(data_dir, name))

    bot = Chatbot(Settings.load(env_file=None, data_dir=data_dir))
    with caplog.at_level(logging.WARNING):
        answer = bot.ask(QUESTION)

    assert SOURCE in [c.doc_id for c in answer.citations], "the answer cites the auction summary"
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, f"expected one warning, got: {warnings}"
    assert "keyword index" in warnings[0] and "rebuilding it from the store" in warnings[0]
    assert str(_keyword_folder(data_dir)) in warnings[0], "the warning names the folder"
    meta = json.loads((_keyword_folder(data_dir) / "ids.json").read_text())
    repaired = KeywordIndex.load(_keyword_folder(data_dir), meta["revision"])
    assert repaired is not None, "the rebuilt index is saved, so the next process loads it"
    assert repaired.search("combinatorial auctions", 1), "the rebuilt index finds passages"


@pytest.mark.slow
@pytest.mark.parametrize("command", [["ask", QUESTION, "--json"], ["info"], ["ingest", "--quiet"]])
def test_the_commands_notice_a_damaged_keyword_index_in_one_line_and_repair_it(data_dir, command):
    _truncate(_bm25_file(data_dir, "vocab.index.json"))

    result = run_cli(data_dir, *command)

    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "keyword index" in lines[0], f"one warning: {result.stderr}"
    assert str(_keyword_folder(data_dir)) in lines[0], "the warning names the folder"
    if command[0] == "ask":
        assert SOURCE in _cited(result), "the answer should cite the auction summary"
    meta = json.loads((_keyword_folder(data_dir) / "ids.json").read_text())
    assert KeywordIndex.load(_keyword_folder(data_dir), meta["revision"]) is not None


# Each process rebuilds and saves the keyword index, then loads what is on disk, many times.
PROCESSES = 3
_REBUILDER = """
import os, sys, time
from pathlib import Path
from chatbot import Chatbot, Settings
from chatbot import Chatbot, Settings
from chatbot.index.bm25 import KeywordIndex

bot = Chatbot(Settings.load(env_file=None, data_dir=Path(sys.argv[1])))
retriever = bot.retriever
revision = bot.store.revision
# Ready: say so, then start once every process is (so the rebuilds overlap however slow the
# imports were).
ready = Path(sys.argv[2])
(ready / str(os.getpid())).touch()
deadline = time.monotonic() + 240
while len(list(ready.iterdir())) < int(sys.argv[4]):
    if time.monotonic() > deadline:
        sys.exit("the other processes never became ready")
    time.sleep(0.01)
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
def test_three_processes_rebuilding_the_keyword_index_at_once_never_fail(data_dir, tmp_path):
    ready = tmp_path / "ready"
    ready.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _REBUILDER, str(data_dir), str(ready), "150", str(PROCESSES)],
            cwd=ROOT,
            env=cli_env(data_dir),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
        assert not out.strip(), f"a rebuild or load failed while others rebuilt:\n{out}"
        assert not err.strip(), f"nothing should be reported:\n{err}"
    result = run_cli(data_dir, "ask", QUESTION, "--json")
    assert SOURCE in _cited(result) and not result.stderr, result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["truncate", "garbage", "inside"])
def test_a_damaged_chroma_database_is_named_and_ingest_rebuild_recovers(data_dir, damage):
    db = data_dir / "chroma" / "chroma.sqlite3"
    if damage == "truncate":
        with db.open("r+b") as f:
            f.truncate(db.stat().st_size // 2)
    elif damage == "inside":
        # Pages in the middle of the file: SQLite opens it and meets the damage on a query.
        start = db.stat().st_size // 4
        with db.open("r+b") as f:
            f.seek(start)
            f.write(bytes(range(256)) * 16)
    else:
        _garbage(db)
    damaged = db.read_bytes()
    # Chroma writes to a database it could open, so there only the damaged pages are evidence.
    evidence = slice(start, start + 4096) if damage == "inside" else slice(None)

    asked = run_cli(data_dir, "ask", QUESTION)
    assert asked.returncode != 0, "a damaged store cannot answer"
    assert asked.stderr.count("\n") == 1, f"one line, not a traceback: {asked.stderr}"
    assert str(db) in asked.stderr and rebuild_command(data_dir) in asked.stderr, asked.stderr
    assert "unexpected" not in asked.stderr, asked.stderr

    rebuilt = run_cli(data_dir, "ingest", "--rebuild", "--quiet")
    assert rebuilt.returncode == 0, f"ingest --rebuild should work anyway: {rebuilt.stderr}"
    assert "20 added" in rebuilt.stdout, rebuilt.stdout
    kept = [p for p in data_dir.iterdir() if p.name.startswith("chroma.broken-")]
    assert len(kept) == 1, f"the damaged store is kept aside: {sorted(data_dir.iterdir())}"
    kept_db = (kept[0] / "chroma.sqlite3").read_bytes()
    assert kept_db[evidence] == damaged[evidence], "the damaged store is kept"
    assert str(kept[0]) in rebuilt.stderr, f"ingest says where it went: {rebuilt.stderr}"
    assert SOURCE in _cited(run_cli(data_dir, "ask", QUESTION, "--json"))


@pytest.mark.slow
def test_an_emptied_chroma_database_is_not_silently_replaced_by_a_new_one(data_dir):
    db = data_dir / "chroma" / "chroma.sqlite3"
    _truncate(db)

    result = run_cli(data_dir, "info")

    assert result.returncode != 0, f"an empty store next to its vectors is damage: {result.stdout}"
    assert str(db) in result.stderr and rebuild_command(data_dir) in result.stderr
    assert db.stat().st_size == 0, "nothing is written over the evidence"


_READ_ONLY = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


def _read_only_cli(folder: Path, data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """Run `chatbot ARGS` with `folder` mounted read-only, for this process only (binds root)."""
    command = ["unshare", "-m", "sh", "-c", _READ_ONLY, "sh", str(folder)]
    return subprocess.run(
        [*command, sys.executable, "-m", "chatbot", *args],
        cwd=ROOT,
        env=cli_env(data_dir),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def read_only_mounts(tmp_path_factory) -> None:
    """Skip unless a private read-only bind mount can be made here (root in a namespace)."""
    folder = tmp_path_factory.mktemp("ro-probe")
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    probe = ["unshare", "-m", "sh", "-c", _READ_ONLY, "sh", str(folder), "touch", str(folder / "x")]
    done = subprocess.run(probe, capture_output=True, text=True)
    if "Read-only file system" not in done.stderr:
        pytest.skip(f"cannot make a private read-only mount here: {done.stderr.strip()}")


@pytest.mark.slow
def test_a_read_only_data_directory_gives_one_line_naming_it(read_only_mounts, data_dir):
    for command in (["info"], ["ask", QUESTION]):
        result = _read_only_cli(data_dir, data_dir, *command)
        assert result.returncode != 0, result.stdout
        assert result.stderr.count("\n") == 1, f"one line, not a traceback: {result.stderr}"
        assert str(data_dir) in result.stderr and "writable" in result.stderr, result.stderr
        assert "unexpected" not in result.stderr, result.stderr


@pytest.mark.slow
def test_a_read_only_stale_keyword_index_is_rebuilt_in_memory(read_only_mounts, data_dir):
    ids = _keyword_folder(data_dir) / "ids.json"
    ids.write_text(json.dumps({**json.loads(ids.read_text()), "revision": "older"}))

    result = _read_only_cli(data_dir / "bm25", data_dir, "ask", QUESTION, "--json")

    assert SOURCE in _cited(result), "reading works when only the keyword index is read-only"
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and str(_keyword_folder(data_dir)) in lines[0], result.stderr
    assert "writable" in lines[0], lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("page", [1, 6, "middle"])
def test_damage_on_any_page_is_one_line_naming_the_store_never_a_panic(data_dir, page):
    # Damage on some pages makes Chroma's Rust core panic (its backtrace printed first), on
    # others Chroma reports only "Failed to get segments" or "Failed to pull logs".
    db = data_dir / "chroma" / "chroma.sqlite3"
    offset = db.stat().st_size // 2 // 4096 * 4096 if page == "middle" else page * 4096
    with db.open("r+b") as f:
        f.seek(offset)
        f.write(bytes(range(256)) * 16)
    asked = run_cli(data_dir, "ask", QUESTION)
    assert "panicked" not in asked.stderr and "unexpected" not in asked.stderr, asked.stderr
    if asked.returncode:
        assert asked.stderr.count("\n") == 1, f"one line: {asked.stderr}"
        assert str(db) in asked.stderr and rebuild_command(data_dir) in asked.stderr, asked.stderr
    else:
        assert "[1]" in asked.stdout, "an undamaged page still answers"
