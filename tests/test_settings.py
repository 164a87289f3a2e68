"""Settings come from .env, then the environment, then flags; defaults work offline."""

from __future__ import annotations

import pytest

from chatbot import ConfigError, Settings


def test_defaults_are_offline_and_outside_the_repo(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    s = Settings.load(env_file=None)
    assert s.uses_offline_model and s.model_label.startswith("offline")
    assert s.data_dir == tmp_path / "icml-chatbot"
    assert s.collection == "summaries" and s.embeddings == "minilm"


def test_env_file_then_environment_then_overrides(monkeypatch, tmp_path):
    env = tmp_path / ".env"
    env.write_text("CHATBOT_TOP_K=7\nCHATBOT_COLLECTION=from-file\nCHATBOT_MODEL=gpt-4o-mini\n")
    monkeypatch.setenv("CHATBOT_COLLECTION", "from-env")
    s = Settings.load(env_file=env, data_dir=tmp_path)
    assert s.top_k == 7 and s.collection == "from-env"
    assert s.uses_offline_model, "a model name without a key or server still means offline"
    s = Settings.load(env_file=env, data_dir=tmp_path, collection="from-flag", model="offline")
    assert s.collection == "from-flag" and s.model_name == "offline"


def test_a_key_selects_a_real_model_and_stays_out_of_repr(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SECRET")
    s = Settings.load(env_file=None, data_dir=tmp_path)
    assert s.model_name == "gpt-4o-mini" and not s.uses_offline_model
    assert "sk-SECRET" not in repr(s) and "sk-SECRET" not in s.model_label


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("CHATBOT_TOP_K", "five", "CHATBOT_TOP_K"),
        ("CHATBOT_EMBEDDINGS", "word2vec", "minilm"),
        ("CHATBOT_COLLECTION", "ab", "3 or more"),
    ],
)
def test_bad_settings_say_how_to_fix_them(monkeypatch, tmp_path, name, value, words):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=words):
        Settings.load(env_file=None, data_dir=tmp_path)
