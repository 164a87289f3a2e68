"""The other embedding backend: an OpenAI-compatible /v1/embeddings server (a real one, local)."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from chatbot import Chatbot, ConfigError, Settings

DIM = 256


def hashed_vector(text: str) -> np.ndarray:
    """A deterministic bag-of-words vector: enough for lexical retrieval to work."""
    vec = np.zeros(DIM, dtype=np.float32)
    for word in re.findall(r"[a-z]{3,}", text.lower()):
        vec[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
    return vec / (np.linalg.norm(vec) or 1.0)


class EmbeddingServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), EmbeddingHandler)
        self.requests: list[dict] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class EmbeddingHandler(BaseHTTPRequestHandler):
    server: EmbeddingServer

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body["authorization"] = self.headers.get("Authorization")
        self.server.requests.append(body)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(texts):
            vec = hashed_vector(text)
            # The openai client asks for base64 unless told otherwise; serve what is asked.
            if body.get("encoding_format") == "base64":
                emb = base64.b64encode(vec.astype("<f4").tobytes()).decode()
            else:
                emb = vec.tolist()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        reply = {
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }
        raw = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def server():
    srv = EmbeddingServer()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_ingest_and_ask_with_an_openai_compatible_embedding_server(server, tmp_path):
    settings = Settings.load(
        env_file=None,
        data_dir=tmp_path,
        embeddings="openai",
        embedding_model="local-embedder",
        embedding_base_url=server.url,
        embedding_api_key="sk-local",
    )
    bot = Chatbot(settings)
    report = bot.ingest()
    assert report.added == 20
    embedded = [t for r in server.requests for t in r["input"]]
    assert len(embedded) >= 20 and all(r["model"] == "local-embedder" for r in server.requests)
    assert server.requests[0]["authorization"] == "Bearer sk-local"

    answer = bot.ask("Which auctions sell spectrum licenses to telecom companies?")
    assert answer.citations[0].doc_id == "combinatorial-auctions"
    assert bot.info()["embedding_model"] == "local-embedder"


def test_switching_embedding_models_on_a_built_collection_says_how_to_fix_it(server, data_dir):
    settings = Settings.load(
        env_file=None, data_dir=data_dir, embeddings="openai", embedding_base_url=server.url
    )
    with pytest.raises(ConfigError, match="--rebuild"):
        Chatbot(settings).retrieve("optimal transport")
    bot = Chatbot(settings)
    assert bot.ingest(rebuild=True).added == 20, "--rebuild moves the collection to the new model"
    assert bot.retrieve("optimal transport", k=1)[0].doc_id == "optimal-transport"
    assert bot.info()["embedding_model"] == "text-embedding-3-small"


def test_openai_embeddings_without_key_or_server_is_a_config_error(tmp_path):
    bot = Chatbot(Settings.load(env_file=None, data_dir=tmp_path, embeddings="openai"))
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        bot.retrieve("optimal transport")
