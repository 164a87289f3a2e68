"""A real `chroma run` server on 127.0.0.1: ingest, ask, filters, incremental re-ingest."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from chatbot import Chatbot, Settings, StoreError
from chatbot.index.records import Fields
from chatbot.serve.cli import main
from tests.conftest import SHARED, needs_shared

# A Chroma server in its own process for the module: slow, left out of `pytest -m "not slow"`.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHROMA = Path(sys.executable).with_name("chroma")
ABSTRACTS = SHARED / "data" / "icml_2020_2023_abstracts.jsonl"
HOPFIELD = "Which theory links Transformers to modern Hopfield networks?"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The URL of a Chroma server started for these tests, stopped after them."""
    if not CHROMA.is_file():
        pytest.skip(f"the chroma CLI is not installed at {CHROMA}")
    port = _free_port()
    folder = tmp_path_factory.mktemp("chroma-server")
    log = (folder / "server.log").open("wb")
    command = [str(CHROMA), "run", "--path", str(folder / "db"), "--host", "127.0.0.1"]
    proc = subprocess.Popen(
        [*command, "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"chroma run did not start: {(folder / 'server.log').read_text()}")
            time.sleep(0.3)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture
def remote(server, data_dir):
    """Settings using the server; the data dir (a copy of the built index) lends its vectors."""
    return Settings.load(env_file=None, data_dir=data_dir, chroma_url=server)


def _collection_count(url: str, name: str) -> int:
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    port = int(url.rsplit(":", 1)[1])
    client = chromadb.HttpClient(
        host="127.0.0.1", port=port, settings=ChromaSettings(anonymized_telemetry=False)
    )
    return client.get_collection(name).count()


def test_ingest_and_ask_through_the_server(remote, server):
    bot = Chatbot(remote, collection="summaries-remote")
    report = bot.ingest()
    assert report.added == 20, report
    assert _collection_count(server, "summaries-remote") == bot.store.count() > 0, (
        "the passages should live on the server"
    )
    answer = Chatbot(remote, collection="summaries-remote").ask(HOPFIELD)
    assert not answer.abstained and answer.citations, answer
    assert answer.citations[0].doc_id == "transformers-associative-memory", answer.citations


def test_incremental_reingest_on_the_server(remote, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(ROOT / "corpus", corpus)
    bot = Chatbot(remote, collection="incremental")
    assert bot.ingest([corpus]).added == 20
    unchanged = Chatbot(remote, collection="incremental").ingest([corpus])
    assert (unchanged.unchanged, unchanged.passages) == (20, 0), unchanged
    files = sorted(corpus.glob("*.md"))
    files[0].unlink()
    files[1].write_text(files[1].read_text() + "\nA closing remark added later.\n")
    report = Chatbot(remote, collection="incremental").ingest([corpus])
    assert (report.removed, report.updated, report.unchanged) == (1, 1, 18), report


@needs_shared("data", ABSTRACTS.name)
def test_filters_on_the_server(remote, tmp_path):
    lines = ABSTRACTS.read_text(encoding="utf-8").splitlines()
    path = tmp_path / "few.jsonl"
    path.write_text("\n".join(lines[:15] + lines[-15:]) + "\n")
    bot = Chatbot(remote, collection="abstracts-remote")
    assert bot.ingest([path], fields=Fields(title="", text="title")).added == 30
    years = {json.loads(line)["year"] for line in lines[-15:]}
    passages = bot.retrieve("learning", k=10, where={"year": max(years)})
    assert passages and {p.metadata["year"] for p in passages} == {max(years)}


def test_cli_uses_the_server(remote, server, capsys):
    Chatbot(remote, collection="summaries-cli").ingest()
    args = ["--data-dir", str(remote.data_dir), "--chroma-url", server]
    code = main([*args, "--collection", "summaries-cli", "ask", HOPFIELD, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["citations"], out
    assert out["citations"][0]["doc_id"] == "transformers-associative-memory"


def test_a_server_that_is_down_names_the_url(tmp_path, capsys):
    url = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(StoreError, match=url.replace(".", r"\.")):
        Chatbot(Settings.load(env_file=None, data_dir=tmp_path, chroma_url=url)).ask(HOPFIELD)
    code = main(["--data-dir", str(tmp_path), "--chroma-url", url, "ask", HOPFIELD])
    err = capsys.readouterr().err
    assert code == 1 and url in err and "chroma run" in err, err


def test_a_server_address_without_http_is_the_same_server(remote, server, capsys):
    Chatbot(remote, collection="summaries-bare").ingest()
    bare = server.removeprefix("http://")
    args = ["--data-dir", str(remote.data_dir), "--chroma-url", bare, "--collection"]
    code = main([*args, "summaries-bare", "info", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["documents"] == 20, out
    assert out["store"] == server, "shown as the address it was read as"
