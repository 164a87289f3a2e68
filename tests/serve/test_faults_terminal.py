"""What reaches a terminal: text from documents and models without escape sequences, cut-off answers
marked on stdout, and the command line's smaller promises (an empty search says so, a bad port,
the exact command that finishes an interrupted ingest, symlink loops named, odd record ids)."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from chatbot import Chatbot, Settings
from chatbot.errors import QuestionError
from chatbot.serve.cli import main
from chatbot.serve.terminal import CUT_OFF, StreamCleaner, clean
from tests.answer.test_faults_model import fake, model_env, openai_server  # noqa: F401 (fixtures)
from tests.answer.test_llm import QUESTION as MODEL_QUESTION
from tests.helpers import run_cli

# Clear the screen, retitle the window, hide text, plant an OSC 8 link, 8-bit CSI, bell, bidi.
ATTACKS = [
    "\x1b[2J\x1b[H",
    "\x1b]0;owned\x07",
    "\x1b[8m",
    "\x1b]8;;http://evil.example/\x1b\\",
    "\x9b31m",
    "\x07",
    "\u202e",
    "\x1bP+q\x1b\\",
]
HOSTILE = "".join(ATTACKS)
# Anything that makes a terminal act: ESC, the C1 controls, BEL, bidirectional overrides.
ACTIVE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
QUESTION = "How do lighthouse keepers calibrate fresnel lenses?"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, Path]:
    """A data directory holding one document with escape sequences in its id, title, url, text."""
    folder = tmp_path_factory.mktemp("hostile")
    docs = folder / "docs"
    docs.mkdir()
    front = {
        "id": f"fresnel{HOSTILE}",
        "title": f"Fresnel lens {HOSTILE}calibration",
        "url": f"https://example.org/{HOSTILE}",
    }
    body = (
        f"Lighthouse keepers calibrate fresnel lenses {HOSTILE}by rotating each prism ring "
        "until the beam converges on the horizon line at dusk. Fresnel lenses focus the "
        f"lighthouse lamp {HOSTILE}into one beam that reaches ships thirty miles away."
    )
    lines = "\n".join(f"{k}: {json.dumps(v)}" for k, v in front.items())
    (docs / "fresnel.md").write_text(f"---\n{lines}\n---\n{body}\n", "utf-8")
    (docs / f"empty{ATTACKS[1]}.md").write_text("", "utf-8")  # skipped, and named
    data = folder / "data"
    return data, docs


def _shows_nothing_active(text: str, where: str) -> None:
    found = sorted({f"U+{ord(c):04X}" for c in ACTIVE.findall(text)})
    assert not found, f"{where} passes {found} to the terminal: {text[:400]!r}"


def test_ingest_names_a_file_without_its_escape_sequences(hostile, capsys):
    data, docs = hostile
    code = main(["--data-dir", str(data), "ingest", "--quiet", str(docs)])
    out = capsys.readouterr()
    assert code == 1, "the empty file is skipped, with exit code 1"
    assert "skipped" in out.err and "empty.md: is empty" in out.err, out.err
    _shows_nothing_active(out.out + out.err, "ingest")


@pytest.mark.parametrize("command", ["ask", "retrieve"])
def test_ask_and_retrieve_print_document_text_without_escape_sequences(hostile, capsys, command):
    data, docs = hostile
    main(["--data-dir", str(data), "ingest", "--quiet", str(docs)])
    capsys.readouterr()
    assert main(["--data-dir", str(data), command, QUESTION]) == 0
    out = capsys.readouterr()
    assert "prism ring" in out.out, f"the text is still shown: {out.out!r}"
    assert "Fresnel lens" in out.out and "fresnel" in out.out, "the title and id are still shown"
    _shows_nothing_active(out.out + out.err, command)
    # JSON keeps every character, escaped as JSON escapes.
    assert main(["--data-dir", str(data), command, QUESTION, "--json"]) == 0
    printed = capsys.readouterr().out
    _shows_nothing_active(printed, f"{command} --json")
    assert "\\u001b]0;owned" in printed, "--json keeps the data, escaped as JSON"


def test_chat_prints_document_text_without_escape_sequences(hostile):
    data, _ = hostile
    result = run_cli(data, "chat", input=f"{QUESTION}\n", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "prism ring" in result.stdout, result.stdout
    _shows_nothing_active(result.stdout + result.stderr, "chat")


def test_clean_keeps_text_and_removes_every_sequence():
    assert clean(f"a{HOSTILE}b\r\nc\td") == "ab\nc\td"
    assert clean("line\roverwritten") == "line\noverwritten", "a lone CR cannot hide a line"
    assert clean("unterminated \x1b]0;title") == "unterminated ", "an OSC string never ends"


def test_a_cut_off_answer_is_marked_on_stdout(fake, built_index):  # noqa: F811
    fake.script = [{"cut_after": 3}]
    result = run_cli(built_index, "ask", MODEL_QUESTION, timeout=60, **model_env(fake))
    assert result.returncode == 1, result.stderr
    assert result.stdout.rstrip().endswith(CUT_OFF), (
        f"stdout alone must say the answer is incomplete: {result.stdout!r}"
    )


def test_retrieve_with_no_result_says_so(built_index, capsys):
    code = main(["--data-dir", str(built_index), "retrieve", "graphs", "--where", "doc_id=nope"])
    out = capsys.readouterr()
    assert code == 1, "an empty search is not a success"
    assert out.out == "" and "No passage matches" in out.err, out


@pytest.mark.parametrize("port", ["99999", "0", "http"])
def test_a_port_out_of_range_is_one_clear_line(port, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--port", port])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and ("1 to 65535" in err or "1-65535" in err), err
    assert "Traceback" not in err and "OverflowError" not in err


def test_the_interrupt_hint_names_the_collection_and_the_paths(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("Notes about lighthouses and their lenses.", "utf-8")
    from chatbot import chatbot as qa

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(qa.Chatbot, "ingest", interrupted)
    code = main(["--data-dir", str(tmp_path / "d"), "--collection", "notes", "ingest", str(folder)])
    err = capsys.readouterr().err
    assert code == 128 + signal.SIGINT
    assert f"--collection notes ingest {folder}" in err, err


def test_a_symlink_loop_is_named_as_skipped(tmp_path, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.md").write_text("Lighthouse lenses focus light into a beam.", "utf-8")
    (folder / "loop.md").symlink_to(folder / "loop.md")
    code = main(["--data-dir", str(tmp_path / "d"), "ingest", "--quiet", str(folder)])
    err = capsys.readouterr().err
    assert code == 1 and "loop.md: is a symbolic link that leads nowhere" in err, err


def test_a_record_id_that_is_an_object_is_refused_by_name(tmp_path):
    path = tmp_path / "records.jsonl"
    rows = [{"id": {"doi": "10.1/x"}, "text": "A record about fresnel lenses."}]
    rows.append({"id": 7, "text": "A record about lighthouse keepers."})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    bot = Chatbot(Settings.load(env_file=None, data_dir=tmp_path / "d"))
    report = bot.ingest([path])
    assert report.added == 1, "the record with a number for its id is indexed"
    assert [str(p) for p in report.problems] == [
        f"{path} line 1: its 'id' field is an object: a record id must be text or a number"
    ]
    assert {d.doc_id for d in bot.documents()} == {"7"}, "no Python repr is stored as an id"


@pytest.mark.parametrize("question", [42, None, ["a question"]])
def test_a_question_that_is_not_text_is_named_as_such(bot, question):
    with pytest.raises(QuestionError, match="must be text"):
        bot.ask(question)


def test_where_authors_matches_one_author_of_several(tmp_path, capsys):
    path = tmp_path / "papers.jsonl"
    rows = [
        {"id": "p1", "title": "Lens grinding", "authors": ["Ada Lovelace", "Alan Turing"]},
        {"id": "p2", "title": "Beam timing", "authors": ["Grace Hopper"]},
        {"id": "p3", "title": "Prism rings", "authors": "Alan Turing, Grace Hopper"},
    ]
    for row in rows:
        row["text"] = f"{row['title']} for lighthouse fresnel lenses, measured at sea."
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    data = str(tmp_path / "d")
    assert main(["--data-dir", data, "--collection", "papers", "ingest", "--quiet", str(path)]) == 0

    def found(*where: str) -> set[str]:
        conditions = [w for c in where for w in ("--where", c)]
        args = ["--data-dir", data, "--collection", "papers", "retrieve", "lenses", "--json"]
        capsys.readouterr()
        main([*args, *conditions])
        return {row["doc_id"] for row in json.loads(capsys.readouterr().out)}

    assert found("authors=Alan Turing") == {"p1", "p3"}, "each paper Turing is one author of"
    assert found("authors=ada lovelace") == {"p1"}, "names compare as names, in any case"
    assert found("authors!=Grace Hopper") == {"p1"}
    assert found("authors=Alan Turing", "authors=Grace Hopper") == {"p3"}


# -- a sequence the model streams in two pieces is removed whole --------------------------------

# Pieces of a streamed answer (the fake server sends 7 characters at a time): each sequence is cut
# between two of them, and "[0m" also appears as plain text, with no ESC before it.
SPLIT = [
    "Lenses\x1b",
    "[0m foc",
    "us \x1b[31",
    "mlight ",
    "hidden\x1b",
    "[0m; [0",
    "m is te",
    "xt.\x1b]0;",
    "titled\x1b",
    "\\ Done\x1b",
]


def test_a_sequence_split_across_streamed_pieces_is_removed_whole(
    fake,  # noqa: F811
    built_index,
    capsys,
    monkeypatch,
):
    assert all(len(piece) == 7 for piece in SPLIT[:-1]), (
        "each piece must be one chunk of the server"
    )
    fake.script = [{"content": "".join(SPLIT)}]
    for name, value in model_env(fake).items():
        monkeypatch.setenv(name, value)
    assert main(["--data-dir", str(built_index), "ask", MODEL_QUESTION]) == 0
    out = capsys.readouterr().out
    _shows_nothing_active(out, "ask")
    answer = out.split("\n")[0]
    assert answer == "Lenses focus light hidden; [0m is text. Done", (
        f"no part of a split sequence may show, and text without an ESC stays: {answer!r}"
    )


def test_streamed_text_is_cleaned_as_if_it_came_whole_wherever_it_is_cut():
    text = f"Keep [0m and 31m as text.{HOSTILE}\r\nEnd of\r{HOSTILE} the answer."
    whole = clean(text)
    assert "Keep [0m and 31m as text." in whole and "End of\n the answer." in whole
    cuts = [[text[:i], text[i:]] for i in range(1, len(text))] + [list(text)]
    for pieces in cuts:
        shown = StreamCleaner()
        streamed = "".join(shown.feed(piece) for piece in pieces) + shown.close()
        assert streamed == whole, f"cut into {pieces[:3]!r}…: {streamed!r}"


def test_an_unfinished_sequence_at_the_end_of_a_stream_is_dropped():
    shown = StreamCleaner()
    assert shown.feed("Lenses focus light\x1b[3") == "Lenses focus light", "the CSI waits"
    assert shown.close() == "", "a stream that ends inside a sequence prints none of it"
