"""The `chatbot` command as a user runs it, in a new process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.helpers import cli_env, run_cli


def test_ask_json_has_the_documented_shape(built_index):
    question = "What is the final boss of spoken language modeling?"
    result = run_cli(built_index, "ask", question, "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert set(out) == {"answer", "abstained", "citations", "unsupported", "narrowed"}
    assert out["narrowed"] == [], "a question naming no author, year or venue narrows nothing"
    assert out["abstained"] is False and "[1]" in out["answer"]
    assert out["unsupported"] == [], "the offline model's verbatim quotes are all supported"
    first = out["citations"][0]
    assert {"n", "doc_id", "title", "text", "score"} <= set(first)
    assert first["doc_id"] == "long-form-speech"


def test_ask_prints_the_answer_then_its_sources(built_index):
    result = run_cli(built_index, "ask", "What is Algorithmic Collective Action?", "-k", "3")
    assert result.returncode == 0, result.stderr
    answer, sources = result.stdout.split("Sources:")
    assert "[1]" in answer
    assert "algorithmic-collective-action" in sources
    assert "https://icml.cc/virtual/2025/poster/46504" in sources, "the paper link is shown"


def test_off_topic_question_abstains_in_json(built_index):
    result = run_cli(built_index, "ask", "What is the capital of Peru?", "--json")
    out = json.loads(result.stdout)
    assert out["abstained"] is True and out["citations"] == []
    assert out["answer"] == "The corpus does not answer this question."


def test_errors_are_one_line_on_stderr_with_a_nonzero_exit(built_index):
    result = run_cli(built_index, "ask", "   ")
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "empty" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""

    bad = run_cli(built_index, "ask", "What is OT?", CHATBOT_TOP_K="many")
    assert bad.returncode != 0 and "CHATBOT_TOP_K" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow
def test_chat_keeps_the_conversation(built_index):
    result = run_cli(
        built_index,
        "chat",
        input="What is generative social choice?\nWhich systems does it mention?\n",
    )
    assert result.returncode == 0, result.stderr
    second = result.stdout.split("Sources:")[1]
    assert "Polis" in second, "the follow-up is answered about the same paper"


def test_info_shows_where_and_what(built_index):
    result = run_cli(built_index, "info", "--json")
    info = json.loads(result.stdout)
    assert info["documents"] == 20 and info["passages"] >= 20
    assert info["data_dir"] == str(built_index)
    assert info["embedding_model"] == "all-MiniLM-L6-v2"
    assert info["model"].startswith("offline")


def test_info_names_a_configured_model_but_never_the_key(built_index):
    key = "sk-test-SECRET-1234567890"
    result = run_cli(
        built_index,
        "info",
        OPENAI_API_KEY=key,
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        CHATBOT_MODEL="llama3",
    )
    assert "llama3 at http://127.0.0.1:9/v1" in result.stdout
    assert key not in result.stdout + result.stderr


def test_output_cut_short_by_the_reader_is_not_an_error(built_index):
    # `chatbot ask "…" | head -1`: the reader goes away before the answer is written.
    proc = subprocess.Popen(
        [sys.executable, "-m", "chatbot", "ask", "What is generative social choice?"],
        cwd=ROOT,
        env=cli_env(built_index),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, err
    assert "error" not in err and "Traceback" not in err, err
