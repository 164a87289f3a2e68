"""Where the index lives, as a user names it: a Chroma address, another program's collection."""

from __future__ import annotations

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from chatbot import ConfigError, Settings
from chatbot.settings import chroma_server_url
from tests.helpers import run_cli


def test_a_chroma_address_is_read_with_or_without_its_scheme():
    for given, read in [
        ("localhost:8000", "http://localhost:8000"),
        ("127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("https://chroma.example:443", "https://chroma.example:443"),
        ("[::1]:8000", "http://[::1]:8000"),
    ]:
        assert chroma_server_url(given) == read, given
        assert Settings.load(env_file=None, data_dir="x", chroma_url=given).chroma_url == read


def test_an_address_that_is_not_one_is_named_in_one_line_with_the_form(tmp_path):
    done = run_cli(tmp_path, "info", CHATBOT_CHROMA_URL="localhost:eight")
    error = done.stderr.strip()
    assert done.returncode == 1 and error.count("\n") == 0, done
    assert "'localhost:eight'" in error and "http://HOST:PORT" in error, error
    for bad in ("ftp://127.0.0.1:8000", ":8000"):
        with pytest.raises(ConfigError, match="http://HOST:PORT"):
            Settings.load(env_file=None, data_dir=tmp_path, chroma_url=bad)


def test_a_collection_another_program_made_is_named_not_a_key_error(tmp_path):
    data = tmp_path / "data"
    client = chromadb.PersistentClient(
        path=str(data / "chroma"), settings=ChromaSettings(anonymized_telemetry=False)
    )
    theirs = client.create_collection("their-notes", metadata={"hnsw:space": "cosine"})
    theirs.add(
        ids=["a", "b"],
        documents=["notes on transformers", "notes on diffusion"],
        embeddings=[[0.1] * 384, [0.2] * 384],
        metadatas=[{"source": "app"}, {"source": "app"}],
    )
    del theirs, client
    done = run_cli(data, "--collection", "their-notes", "info")
    error = done.stderr.strip()
    assert done.returncode == 1 and "KeyError" not in error and error.count("\n") == 0, done
    assert "'their-notes' was not made by this chatbot" in error, error
    assert "--collection" in error, f"the message says what to do: {error}"
