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


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CHATBOT_TIMEOUT", "0"),
        ("CHATBOT_TIMEOUT", "-5"),
        ("CHATBOT_TIMEOUT", "nan"),
        ("CHATBOT_MAX_RETRIES", "0"),
        ("CHATBOT_TOP_K", "0"),
        ("CHATBOT_TOP_K", "98"),
        ("CHATBOT_CHUNK_TOKENS", "0"),
        ("CHATBOT_MIN_RELEVANCE", "1.5"),
        ("CHATBOT_MIN_RELEVANCE", "nan"),
        ("CHATBOT_MAX_QUESTION_CHARS", "0"),
        ("CHATBOT_CONTEXT_WINDOW", "0"),
        ("CHATBOT_MAX_ANSWER_TOKENS", "-1"),
        ("CHATBOT_MAX_FILE_MB", "0"),
    ],
)
def test_a_number_out_of_range_is_refused_naming_the_variable(monkeypatch, tmp_path, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"{name}={value}") as info:
        Settings.load(env_file=None, data_dir=tmp_path)
    assert "must be" in str(info.value), f"the message says what is allowed: {info.value}"


def test_top_k_leaves_room_for_the_three_extra_passages_of_a_list_question(tmp_path):
    assert Settings.load(env_file=None, data_dir=tmp_path, top_k=97).top_k == 97
    with pytest.raises(ConfigError, match="from 1 to 97"):
        Settings.load(env_file=None, data_dir=tmp_path, top_k=98)


def test_a_changed_copy_is_checked_too(tmp_path):
    s = Settings.load(env_file=None, data_dir=tmp_path)
    assert s.with_(top_k=9).top_k == 9
    with pytest.raises(ConfigError, match="CHATBOT_TIMEOUT"):
        s.with_(timeout=0)


def test_the_keys_never_show_as_text(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SECRET")
    s = Settings.load(env_file=None, data_dir=tmp_path, embedding_api_key="sk-EMBED")
    shown = [str(s.openai_api_key), f"{s.embedding_api_key}", repr(s), str(vars(s))]
    assert not any("sk-SECRET" in t or "sk-EMBED" in t for t in shown), shown
    assert s.openai_api_key.get_secret_value() == "sk-SECRET"
