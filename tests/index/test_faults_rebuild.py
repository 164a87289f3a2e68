"""Rebuilds and repairs that lose nothing: `ingest --rebuild` names every folder and collection it
would drop and waits for --yes, and a damaged embedding cache is moved aside and rebuilt."""

from __future__ import annotations

import shlex
import sqlite3
from pathlib import Path

import pytest

from chatbot import Chatbot, Settings
from chatbot.serve.cli import main
from tests.helpers import run_cli

QUESTION = "What is a combinatorial auction?"
NOTES = [
    ("lenses.md", "Fresnel lenses focus a lighthouse lamp into one beam seen far out at sea."),
    ("keepers.md", "Lighthouse keepers wound the clockwork that turned the lens every night."),
]


def _notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in NOTES:
        (folder / name).write_text(text, "utf-8")
    return folder


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    """`chatbot ARGV` in this process (the model stays loaded between calls)."""
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def cli(capsys, data_dir: Path, *args: str) -> tuple[int, str, str]:
    return _run(capsys, ["--data-dir", str(data_dir), *args])


def _documents(data_dir: Path, collection: str = "summaries") -> int:
    settings = Settings.load(env_file=None, data_dir=data_dir, collection=collection)
    return len(Chatbot(settings).store.documents())


def test_a_rebuild_without_the_users_folders_names_them_and_keeps_everything(
    data_dir, tmp_path, capsys
):
    notes = _notes(tmp_path)
    assert cli(capsys, data_dir, "ingest", "--quiet", str(notes))[0] == 0
    assert _documents(data_dir) == 22

    code, _, err = cli(capsys, data_dir, "ingest", "--rebuild", "--quiet")
    assert code == 1, "a rebuild that would drop documents stops"
    assert str(notes) in err and "(2)" in err and "--yes" in err, err
    assert _documents(data_dir) == 22, "a refused rebuild changes nothing"

    # The command the message gives, as given, rebuilds everything, in this data folder.
    command = shlex.split(err.split("`")[1])
    start = ["chatbot", "--data-dir", str(data_dir), "--collection", "summaries", "ingest"]
    assert command[:6] == start, command
    code, out, err = _run(capsys, [*command[1:], "--quiet"])
    assert code == 0 and "22 added" in out, out + err

    code, out, err = cli(capsys, data_dir, "ingest", "--rebuild", "--yes", "--quiet")
    assert code == 0 and "20 added" in out, err
    assert _documents(data_dir) == 20, "--yes drops what the paths do not cover"


def test_the_rebuild_a_collection_is_told_to_run_names_its_own_sources_only(
    data_dir, tmp_path, capsys
):
    notes = _notes(tmp_path)
    lighthouses = ["--collection", "lighthouses"]
    assert cli(capsys, data_dir, *lighthouses, "ingest", "--quiet", str(notes))[0] == 0

    code, _, err = cli(capsys, data_dir, *lighthouses, "ingest", "--rebuild", "--quiet")
    assert code == 1 and str(notes) in err, err
    command = shlex.split(err.split("`")[1])
    assert command[-3:] == ["ingest", "--rebuild", str(notes)], (
        f"the summaries were never in this collection: {command}"
    )
    code, out, err = _run(capsys, [*command[1:], "--quiet"])
    assert code == 0 and "2 added" in out, out + err
    assert _documents(data_dir, "lighthouses") == 2


@pytest.mark.slow
def test_a_damaged_store_names_every_collection_and_folder_a_rebuild_would_drop(data_dir, tmp_path):
    notes = _notes(tmp_path)
    other = run_cli(data_dir, "--collection", "lighthouses", "ingest", "--quiet", str(notes))
    assert other.returncode == 0, other.stderr
    diary = tmp_path / "diary"
    diary.mkdir()
    (diary / "day.md").write_text("The lamp was lit at dusk and trimmed at midnight.", "utf-8")
    bot = Chatbot(Settings.load(env_file=None, data_dir=data_dir))
    assert bot.ingest([diary], progress=False).added == 1
    db = data_dir / "chroma" / "chroma.sqlite3"
    with db.open("r+b") as f:
        f.write(b"this is not an SQLite header" * 4)

    asked = run_cli(data_dir, "--collection", "lighthouses", "ask", QUESTION)
    told = f"chatbot --data-dir {data_dir} --collection lighthouses ingest --rebuild"
    assert told in asked.stderr, asked.stderr

    refused = run_cli(data_dir, "ingest", "--rebuild", "--quiet")
    assert refused.returncode == 1 and "lighthouses" in refused.stderr, refused.stderr
    # The store cannot say where its documents came from; the keyword index kept it.
    assert f"{diary} (1)" in refused.stderr, refused.stderr
    assert db.read_bytes().startswith(b"this is not"), "nothing is moved before --yes"

    rebuilt = run_cli(data_dir, "ingest", "--rebuild", "--yes", "--quiet")
    assert rebuilt.returncode == 0 and "20 added" in rebuilt.stdout, rebuilt.stderr
    again = run_cli(data_dir, "--collection", "lighthouses", "ingest", "--rebuild", str(notes))
    assert again.returncode == 0 and "2 added" in again.stdout, again.stderr
    assert "0 embedded" in again.stdout or "written" in again.stdout, "vectors from the cache"


def _garbage_header(path: Path) -> None:
    with path.open("r+b") as f:
        f.write(b"\x00garbage, not an SQLite header\x00" * 8)


def _damage_inside(path: Path) -> None:
    # Every page but the first: SQLite opens the file and meets the damage when it reads.
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.seek(4096)
        f.write((bytes(range(256)) * 16) * ((size - 4096) // 4096 + 1))


REBUILD = ["ingest", "--rebuild", "--quiet"]


# `ask` opens the cache (a bad header fails there) but reads no vector from it; a rebuild reads
# every passage's vector, so it meets damage anywhere in the file.
@pytest.mark.parametrize(
    ("damage", "command"),
    [(_garbage_header, ["ask", QUESTION]), (_garbage_header, REBUILD), (_damage_inside, REBUILD)],
)
def test_a_damaged_embedding_cache_is_moved_aside_and_rebuilt(
    data_dir, damage, command, capsys, caplog
):
    cache = data_dir / "embedding-cache.sqlite"
    damage(cache)
    damaged = cache.read_bytes()

    code, out, err = cli(capsys, data_dir, *command)
    assert code == 0, f"the cache only saves work: {err}"
    assert "DatabaseError" not in err, err
    aside = sorted(data_dir.glob("embedding-cache.sqlite.broken-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == damaged, "the damaged file is kept aside"
    # The CLI prints warnings on stderr; under pytest they go to its log capture instead.
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(str(cache) in w and aside[0].name in w for w in warned), warned
    if "--rebuild" in command:
        assert "20 passages embedded" in out, "nothing came from the damaged cache"
    with sqlite3.connect(cache) as db:
        assert db.execute("PRAGMA quick_check").fetchone() == ("ok",), "a sound new cache"

    caplog.clear()
    assert cli(capsys, data_dir, "ask", QUESTION)[0] == 0
    assert not [r for r in caplog.records if r.levelname == "WARNING"], "the new cache is quiet"
