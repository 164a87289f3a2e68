"""Chat clients nobody here wrote, against the real /v1 API: simonw's `llm` CLI and LangChain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from langchain_openai import ChatOpenAI

from chatbot.serve.openai_api import routes as api

QUESTION = "What is generative social choice?"
LLM = Path(sys.executable).with_name("llm")


def llm_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    """`llm ARGS` with its configuration in `home` (LLM_USER_PATH), as a user would run it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_"))}
    env["LLM_USER_PATH"] = str(home)
    # No plugins a developer or `make install-llama` installed: only the OpenAI models built in.
    env["LLM_LOAD_PLUGINS"] = ""
    return subprocess.run(
        [str(LLM), *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def llm_home(api_url, tmp_path_factory) -> Path:
    """An `llm` configuration holding the chatbot as the README says, plus a non-streaming alias."""
    if not LLM.is_file():
        pytest.skip(f"simonw's llm is not installed at {LLM} (pip install -e '.[test]')")
    home = tmp_path_factory.mktemp("llm")
    server = {"model_name": api.MODEL_ID, "api_base": api_url, "api_key_name": "icml-chatbot"}
    models = [
        {"model_id": "icml-chatbot", **server},
        {"model_id": "icml-chatbot-sources", **server, "can_stream": False},
    ]
    (home / "extra-openai-models.yaml").write_text(yaml.safe_dump(models))
    # What `llm keys set icml-chatbot` writes (the server has no key: any value does).
    (home / "keys.json").write_text(json.dumps({"icml-chatbot": "unused"}))
    return home


def _last_logged(home: Path) -> dict:
    logs = llm_cli(home, "logs", "-n", "1", "--json")
    assert logs.returncode == 0, logs.stderr
    return json.loads(logs.stdout)[0]


@pytest.mark.slow  # each `llm` process takes seconds to start
def test_llm_shows_the_cited_answer_with_its_sources(llm_home):
    done = llm_cli(llm_home, "-m", "icml-chatbot", QUESTION)
    assert done.returncode == 0, done.stderr
    assert "[1]" in done.stdout and "\nSources:\n- [1] " in done.stdout, done.stdout
    follow = llm_cli(llm_home, "-c", "Which systems does it mention?")
    assert follow.returncode == 0 and "[1]" in follow.stdout, follow


@pytest.mark.slow
def test_llm_keeps_the_sources_as_data_when_it_does_not_stream(llm_home):
    done = llm_cli(llm_home, "-m", "icml-chatbot-sources", QUESTION)
    assert done.returncode == 0 and "[1]" in done.stdout, done
    logged = _last_logged(llm_home)["response_json"]
    assert logged["usage"]["completion_tokens"] > 0, "the token counts are logged too"
    message = logged["choices"][0]["message"]
    citations = message["citations"]
    assert citations[0]["doc_id"] == "generative-social-choice", citations
    assert citations[0]["quote"] in citations[0]["text"]
    assert message["annotations"][0]["url_citation"]["url"] == citations[0]["url"]


def test_langchain_gets_the_answer_its_footnotes_and_token_counts(api_url):
    model = ChatOpenAI(model=api.MODEL_ID, base_url=api_url, api_key="unused", stream_usage=True)
    reply = model.invoke(QUESTION)
    assert "[1]" in reply.content and "\n\nSources:\n- [1] " in reply.content, reply.content
    assert reply.usage_metadata["input_tokens"] > 0 < reply.usage_metadata["output_tokens"]
    streamed = "".join(chunk.content for chunk in model.stream(QUESTION))
    assert streamed == reply.content, "streamed pieces add up to the whole reply"
