"""Shared fixtures: one real index of the corpus per test session, isolated from the user's data."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The seed summaries, the ICML abstracts and the dev questions, kept beside the repository.
SHARED = Path(os.environ.get("SHARED_DIR") or ROOT.parent / "shared")
CORPUS = ROOT / "corpus"

# Tests never touch the user's data directory, a real API or a developer's .env.
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("OPENAI_BASE_URL", None)
for name in list(os.environ):
    if name.startswith("CHATBOT_"):
        del os.environ[name]
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with the most slow tests first, each file's tests in their own order.

    `make test` hands each of two workers a file at a time, in this order: the long files start
    early and the short ones fill in at the end, instead of one worker finishing a long file
    alone.
    """
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    first = {}
    for i, item in enumerate(items):
        first.setdefault(item.path, i)
    items.sort(key=lambda item: (-slow[item.path], first[item.path]))


def needs_shared(*parts: str) -> pytest.MarkDecorator:
    """Skip a test, saying why, when the file of the shared folder it reads is absent."""
    path = SHARED.joinpath(*parts)
    return pytest.mark.skipif(
        not path.exists(),
        reason=f"{path} is absent: the test reads the shared data folder (../shared or SHARED_DIR)",
    )


@pytest.fixture(scope="session")
def built_index(tmp_path_factory) -> Path:
    """A data directory holding the real index of `corpus/`, built once per session."""
    from chatbot import Chatbot, Settings

    data = tmp_path_factory.mktemp("index")
    bot = Chatbot(Settings.load(env_file=None, data_dir=data))
    report = bot.ingest()
    assert report.added == 20, f"the corpus should index 20 documents, got: {report}"
    return data


@pytest.fixture
def data_dir(built_index, tmp_path) -> Path:
    """A private copy of the built index, for tests that change it."""
    target = tmp_path / "data"
    shutil.copytree(built_index, target)
    return target


@pytest.fixture(scope="session")
def settings(built_index):
    """Settings pointing at the shared, read-only built index."""
    from chatbot import Settings

    return Settings.load(env_file=None, data_dir=built_index)


@pytest.fixture(scope="session")
def bot(settings):
    """A Chatbot with the offline model over the shared index (do not ingest into it)."""
    from chatbot import Chatbot

    return Chatbot(settings)


@pytest.fixture(scope="session")
def api_url(built_index, tmp_path_factory):
    """`chatbot serve --api-only` over a copy of the built index, offline model, no key: its /v1
    URL, shared by the tests that drive it with other programs' clients."""
    from chatbot import Chatbot, Settings
    from chatbot.serve.openai_api import routes as api

    data = tmp_path_factory.mktemp("api-clients") / "data"
    shutil.copytree(built_index, data)
    running = api.serve(Chatbot(Settings.load(env_file=None, data_dir=data)), port=0, block=False)
    yield running.url
    running.close()
