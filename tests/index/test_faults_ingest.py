"""Ingest integrity: nothing indexed is lost or swapped without a word."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from chatbot import Chatbot, Settings
from chatbot.index.documents import BLOCK_CHARS, Document, Splitter, read_document
from tests.conftest import CORPUS, ROOT
from tests.helpers import cli_env, run_cli
from tests.index.test_ingest import _cached_vectors

OWNER = CORPUS / "06-generative-social-choice.md"


def _bot(data: Path, **settings) -> Chatbot:
    return Chatbot(Settings.load(env_file=None, data_dir=data, **settings))


def _prose(chars: int, seed: int = 0, paragraphs: bool = False) -> str:
    """English-like sentences built from the corpus's words, about `chars` long."""
    words = OWNER.read_text("utf-8").split()
    rng = random.Random(seed)
    out, size = [], 0
    while size < chars:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(8, 25))) + ". "
        if paragraphs and rng.random() < 0.1:
            sentence += "\n\n"
        out.append(sentence)
        size += len(sentence)
    return "".join(out)


# -- 1. sources are absolute: another folder with the same relative name is another folder ------


def _two_folders(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "A", tmp_path / "B"
    (a / "notes").mkdir(parents=True)
    (b / "notes").mkdir(parents=True)
    (a / "notes" / "z.md").write_text("Zebra topology.\n", "utf-8")
    (b / "notes" / "w.md").write_text("Walrus acoustics.\n", "utf-8")
    return a, b


def test_ingesting_a_same_named_folder_elsewhere_removes_nothing(tmp_path, monkeypatch):
    a, b = _two_folders(tmp_path)
    bot = _bot(tmp_path / "data")
    monkeypatch.chdir(a)
    assert bot.ingest(["notes"]).added == 1
    monkeypatch.chdir(b)
    report = bot.ingest(["notes"])
    assert (report.added, report.removed) == (1, 0), f"B/notes must not remove A's note: {report}"
    assert set(bot.store.documents()) == {"z", "w"}

    (a / "notes" / "z.md").unlink()
    report = bot.ingest(["notes"])  # still in B: A's file is not this folder's business
    assert (report.unchanged, report.removed) == (1, 0), report
    monkeypatch.chdir(a)
    report = bot.ingest(["notes"])
    assert report.removed == 1 and set(bot.store.documents()) == {"w"}, "its own file is gone"


@pytest.mark.slow
def test_info_says_where_each_source_lives(tmp_path):
    a, b = _two_folders(tmp_path)
    data = tmp_path / "data"
    _bot(data).ingest([a / "notes", b / "notes"])
    result = run_cli(data, "info")
    assert result.returncode == 0, result.stderr
    assert f"{a / 'notes'} (1 document)" in result.stdout, result.stdout
    assert f"{b / 'notes'} (1 document)" in result.stdout, result.stdout
    info = json.loads(run_cli(data, "info", "--json").stdout)
    assert info["sources"] == {str(a / "notes"): 1, str(b / "notes"): 1}


def _make_relative(bot: Chatbot, doc_id: str, source: str) -> None:
    """Give a stored document the relative source an index of older versions holds."""
    got = bot.store.collection.get(where={"doc_id": doc_id}, include=["metadatas"])
    metas = [{**m, "source": source} for m in got["metadatas"]]
    bot.store.collection.update(ids=got["ids"], metadatas=metas)


def test_a_relative_source_of_an_older_index_is_kept_then_made_absolute(tmp_path, monkeypatch):
    a, b = _two_folders(tmp_path)
    bot = _bot(tmp_path / "data")
    bot.ingest([a / "notes"])
    _make_relative(bot, "z", "notes/z.md")

    monkeypatch.chdir(b)
    report = bot.ingest(["notes"])
    assert report.removed == 0, "a relative source is not resolved against another folder"
    assert "z" in bot.store.documents()
    where = bot.info()["sources"]
    assert any(w.startswith("notes (") and "unknown folder" in w for w in where), where

    monkeypatch.chdir(a)
    report = bot.ingest(["notes"])
    assert (report.unchanged, report.embedded, report.relocated) == (1, 0, 1), report
    assert bot.store.documents()["z"].sources == {str(a / "notes" / "z.md")}


# -- 2. one id, two files: an error naming both, unless --replace moves it --------------------


@pytest.mark.slow
def test_a_second_file_claiming_an_id_is_refused_and_both_are_named(data_dir, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "x.md").write_text(
        "---\nid: generative-social-choice\ntitle: Cooking\n---\n"
        "Pasta should be boiled in salted water for ten minutes.\n",
        "utf-8",
    )
    result = run_cli(data_dir, "ingest", str(mine))
    assert result.returncode == 1, result.stdout + result.stderr
    line = result.stderr.strip()
    assert str(mine / "x.md") in line and str(OWNER) in line, f"name both files: {line}"
    assert "--replace" in line and "Traceback" not in line, line
    assert "0 added, 0 updated" in result.stdout

    bot = _bot(data_dir)
    assert bot.store.documents()["generative-social-choice"].source == str(OWNER)
    answer = bot.ask("What is generative social choice?")
    assert answer.citations and answer.citations[0].doc_id == "generative-social-choice"
    assert "Pasta" not in answer.text and "Polis" in " ".join(c.text for c in answer.citations)

    report = bot.ingest([mine], replace=True)
    assert report.updated == 1 and not report.problems, report
    assert bot.store.documents()["generative-social-choice"].source == str(mine / "x.md")
    top = bot.retrieve("How long should pasta be boiled?", k=1)[0]
    assert top.doc_id == "generative-social-choice" and "Pasta" in top.text


def test_editing_the_file_or_record_that_owns_an_id_stays_an_update(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    note = own / "a.md"
    note.write_text("---\nid: shared\n---\nOtters juggle pebbles.\n", "utf-8")
    records = own / "r.jsonl"
    records.write_text(json.dumps({"id": "rec", "text": "Moles dig tunnels."}) + "\n", "utf-8")
    bot = _bot(tmp_path / "data")
    assert bot.ingest([own]).added == 2

    note.write_text("---\nid: shared\n---\nOtters juggle shells.\n", "utf-8")
    records.write_text(json.dumps({"id": "rec", "text": "Moles dig burrows."}) + "\n", "utf-8")
    report = bot.ingest([own])
    assert (report.updated, report.problems) == (2, []), report

    other = tmp_path / "other"
    other.mkdir()
    (other / "b.md").write_text("---\nid: rec\n---\nA note claiming the record's id.\n", "utf-8")
    report = bot.ingest([other])
    assert [p.source for p in report.problems] == [str(other / "b.md")], report.problems
    assert f"{records}#rec" in report.problems[0].message
    assert "burrows" in bot.retrieve("Which animals dig?", k=1)[0].text, "the record is kept"


def test_a_renamed_file_takes_its_id_along(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "old.md").write_text("---\nid: kept\n---\nHerons wade slowly.\n", "utf-8")
    bot = _bot(tmp_path / "data")
    bot.ingest([own])
    (own / "old.md").rename(own / "new.md")
    report = bot.ingest([own])
    assert (report.unchanged, report.relocated, report.problems) == (1, 1, []), report
    assert bot.store.documents()["kept"].sources == {str(own / "new.md")}


def test_replace_is_documented_in_the_help():
    result = subprocess.run(
        [sys.executable, "-m", "chatbot", "ingest", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "--replace" in result.stdout and "move an id" in result.stdout, result.stdout


# -- 8. large files: linear splitting, a bar that moves, a size limit -------------------------


def _split_seconds(splitter: Splitter, text: str) -> float:
    start = time.perf_counter()
    splitter.split(Document("big", "Big", text, "/big.txt"))
    return time.perf_counter() - start


def test_splitting_time_grows_linearly_with_the_text():
    splitter = Splitter()
    _split_seconds(splitter, "warm up the tokenizer.")
    small = min(_split_seconds(splitter, _prose(250_000)) for _ in range(2))
    large = _split_seconds(splitter, _prose(2_000_000, seed=1))
    # Linear: 8 times the text in about 8 times the time; quadratic would be about 64 times.
    assert large < 20 * small, f"250 kB took {small:.2f} s but 2 MB took {large:.2f} s"


def test_short_documents_split_as_before_and_long_ones_lose_no_text():
    splitter = Splitter()
    short = read_document(OWNER)
    whole = [c.strip() for c in splitter._splitter.split_text(short.text) if c.strip()]
    assert [p.text for p in splitter.split(short)] == whole, "short documents split as ever"

    text = _prose(3 * BLOCK_CHARS, paragraphs=True)
    passages = splitter.split(Document("big", "Big", text, "/big.txt"))
    assert all(p.text in text for p in passages)
    words = re.findall(r"\w+", text)
    covered = re.findall(r"\w+", " ".join(p.text for p in passages))
    assert set(words) <= set(covered) and len(covered) >= len(words), "no text is lost"
    assert len({p.passage_id for p in passages}) == len(passages)


def _first_movement(proc) -> tuple[float, str]:
    """Seconds from the bar's first appearance until it counts something; the bar's text."""
    seen: list[str] = []
    appeared = None

    def read() -> None:
        while chunk := proc.stderr.read(1):
            seen.append(chunk)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        text = "".join(seen)
        if appeared is None and "Indexing" in text:
            appeared = time.monotonic()
        counts = [int(n) for n in re.findall(r"(\d+)/\d+ \[", text)]
        if counts and max(counts) > 0:
            return time.monotonic() - appeared, text
        time.sleep(0.05)
    return float("inf"), "".join(seen)


@pytest.mark.slow
def test_the_bar_moves_within_seconds_for_one_big_file(tmp_path):
    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "big.txt").write_text(_prose(1_500_000), "utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-m", "chatbot", "ingest", str(folder)],
        cwd=ROOT,
        env=cli_env(tmp_path / "data"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        waited, bar = _first_movement(proc)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert "passage" in bar, f"one big file is counted in passages: {bar!r}"
    # The machine running the tests is shared: this allows several times what an idle one needs.
    assert waited < 15, f"the bar stood still for {waited:.1f} s: {bar[-300:]!r}"


@pytest.mark.slow
def test_a_big_file_cut_short_is_finished_by_the_next_ingest(tmp_path):
    folder, data = tmp_path / "big", tmp_path / "data"
    folder.mkdir()
    # Two blocks cut into short passages (over 800): more than a batch is still embedding (in a
    # child process) once the first two are written, yet the whole file embeds in seconds.
    (folder / "big.txt").write_text(_prose(BLOCK_CHARS * 6 // 5), "utf-8")
    chunks = {"chunk_tokens": 40, "chunk_overlap": 0}
    proc = subprocess.Popen(
        [sys.executable, "-m", "chatbot", "ingest", str(folder)],
        cwd=ROOT,
        env=cli_env(data, CHATBOT_CHUNK_TOKENS="40", CHATBOT_CHUNK_OVERLAP="0"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while _cached_vectors(data) < 100:
        assert proc.poll() is None and time.monotonic() < deadline, "the ingest made no progress"
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=30)
    bot = _bot(data, **chunks)
    written = bot.store.count()
    assert written and not bot.store.documents()["big"].complete, "a part is never whole"

    report = bot.ingest([folder])
    assert report.updated == 1, report
    doc = bot.store.documents()["big"]
    assert doc.complete and bot.store.count() > written
    chunks = [m["chunk"] for m in bot.store.all_passages()[2]]
    assert sorted(chunks) == list(range(len(chunks))), "every passage once"
    assert bot.ingest([folder]).unchanged == 1


@pytest.mark.slow
def test_a_file_over_the_size_limit_is_named_and_skipped(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "big.txt").write_text(_prose(700_000), "utf-8")
    (folder / "small.md").write_text("Kestrels hover over fields.\n", "utf-8")
    result = run_cli(tmp_path / "data", "ingest", str(folder), CHATBOT_MAX_FILE_MB="0.5")
    assert result.returncode == 1, result.stdout + result.stderr
    line = result.stderr.strip()
    assert "big.txt" in line and "CHATBOT_MAX_FILE_MB" in line, f"name file and setting: {line}"
    assert "1 added" in result.stdout, "the other files are still indexed"

    assert Settings.load(env_file=None, data_dir=tmp_path).max_file_mb == 20
    assert "CHATBOT_MAX_FILE_MB=20" in (ROOT / ".env.example").read_text("utf-8")


# -- 9. content-free documents are empty ---------------------------------------------------------


@pytest.mark.slow
def test_documents_without_text_are_named_as_empty_and_skipped(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "nul.txt").write_bytes(b"\x00" * 4096)
    (folder / "control.md").write_text("\x01\x02 \t\x7f\n\x0b\u200b\ufeff\x00\n", "utf-8")
    (folder / "recs.jsonl").write_text(
        json.dumps({"id": "blank", "text": "\x00\x00 \x1f"})
        + "\n"
        + json.dumps({"id": "fine", "text": "Herons wade."})
        + "\n",
        "utf-8",
    )
    (folder / "good.md").write_text("Kestrels hover over fields.\n", "utf-8")
    data = tmp_path / "data"
    result = run_cli(data, "ingest", str(folder))
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    for name, reason in [("nul.txt", "empty"), ("control.md", "empty"), ("#blank", "no text")]:
        assert any(name in line and reason in line for line in lines), (name, result.stderr)
    assert "2 added" in result.stdout, result.stdout
    assert set(_bot(data).store.documents()) == {"good", "fine"}


# -- 10. a link to a folder is read like a folder; one leading back into a folder read is named --


def _linked_folders(tmp_path: Path) -> Path:
    """A folder with two notes, a link to five notes elsewhere, and links back into folders."""
    notes = tmp_path / "elsewhere" / "notes"
    notes.mkdir(parents=True)
    for i, animal in enumerate(["Otters", "Herons", "Badgers", "Voles", "Newts"]):
        (notes / f"n{i}.md").write_text(f"{animal} live near the river.\n", "utf-8")
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.md").write_text("Kestrels hover over fields.\n", "utf-8")
    (folder / "sub" / "moles.md").write_text("Moles dig tunnels.\n", "utf-8")
    (folder / "notes_alias").symlink_to(notes)
    (folder / "sub" / "up").symlink_to("..")  # loops
    (folder / "dotloop").symlink_to(".")
    (notes / "home").symlink_to(folder)
    (folder / "sub_again").symlink_to("sub")  # a second way to a folder
    return folder


def test_a_link_to_a_folder_is_followed_and_one_leading_back_is_named(tmp_path):
    folder = _linked_folders(tmp_path)
    bot = _bot(tmp_path / "data")
    reports: list = []
    # In a thread, so that a walk that never ends fails the test instead of hanging it.
    ingest = threading.Thread(target=lambda: reports.append(bot.ingest([folder])), daemon=True)
    ingest.start()
    ingest.join(120)
    assert reports, "the ingest must end: each folder is read once, whatever links lead to it"
    report = reports[0]
    assert report.added == 7, f"the 2 notes of the folder and the 5 behind the link: {report}"
    named = {Path(p.source).relative_to(folder).as_posix(): p.message for p in report.problems}
    assert set(named) == {"dotloop", "sub/up", "notes_alias/home", "sub_again"}, (
        f"each link back into a folder already read is named: {report.problems}"
    )
    for where, why in named.items():
        assert "a link back into a folder" in why, f"{where} must say why it is skipped: {why}"
    again = bot.ingest([folder])
    assert (again.unchanged, again.removed, len(again.problems)) == (7, 0, 4), again
    (tmp_path / "elsewhere" / "notes" / "n0.md").unlink()
    assert bot.ingest([folder]).removed == 1, "a note deleted behind the link leaves the index"
    rebuilt = bot.ingest([folder], rebuild=True)
    assert rebuilt.added == 6, f"a rebuild of the folder keeps what its link leads to: {rebuilt}"


# -- what holds as before ------------------------------------------------------------------------


def test_a_file_that_fails_to_parse_keeps_its_passages(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    bot = _bot(tmp_path / "data")
    bot.ingest([corpus])
    (corpus / OWNER.name).write_text("---\ntitle: broken\n\nno closing line", "utf-8")
    report = bot.ingest([corpus])
    assert (report.removed, len(report.problems)) == (0, 1), report
    assert "generative-social-choice" in bot.store.documents()
