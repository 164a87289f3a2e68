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


@pytest.mark.parametrize("blank", [" ", " \t "])
def test_a_blank_api_key_is_refused_from_the_flag_the_environment_and_env_file(
    monkeypatch, tmp_path, blank
):
    env_file = tmp_path / ".env"
    env_file.write_text(f"CHATBOT_API_KEY='{blank}'\n")
    monkeypatch.setenv("CHATBOT_API_KEY", blank)
    for where, load in [
        ("--api-key", lambda: Settings.load(env_file=None, data_dir=tmp_path, api_key=blank)),
        ("CHATBOT_API_KEY", lambda: Settings.load(env_file=None, data_dir=tmp_path)),
        (".env", lambda: Settings.load(env_file=env_file, data_dir=tmp_path)),
    ]:
        if where == ".env":
            monkeypatch.delenv("CHATBOT_API_KEY")
        with pytest.raises(ConfigError) as refused:
            load()
        message = str(refused.value)
        assert "--api-key" in message and "CHATBOT_API_KEY" in message, (where, message)
        assert "empty" in message and "\n" not in message, f"one line saying what to do: {message}"


def test_an_empty_key_line_leaves_the_key_unset_and_a_flag_wins_over_it(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text("CHATBOT_API_KEY=\nCHATBOT_AUTH=\n")
    s = Settings.load(env_file=env_file, data_dir=tmp_path)
    assert s.api_key is None and s.login is None, "an empty line unsets, as for every setting"
    s = Settings.load(env_file=env_file, data_dir=tmp_path, api_key="sk-flag")
    assert s.api_key.get_secret_value() == "sk-flag"
    with pytest.raises(ConfigError, match="--api-key"):
        Settings.load(env_file=env_file, data_dir=tmp_path, api_key="")


@pytest.mark.parametrize("blank", ["  ", "\t"])
def test_a_blank_login_is_refused_from_the_environment_and_env_file(monkeypatch, tmp_path, blank):
    monkeypatch.setenv("CHATBOT_AUTH", blank)
    with pytest.raises(ConfigError, match=r"CHATBOT_AUTH.*user:password"):
        Settings.load(env_file=None, data_dir=tmp_path)
    monkeypatch.delenv("CHATBOT_AUTH")
    env_file = tmp_path / ".env"
    env_file.write_text(f"CHATBOT_AUTH='{blank}'\n")
    with pytest.raises(ConfigError, match=r"CHATBOT_AUTH.*user:password"):
        Settings.load(env_file=env_file, data_dir=tmp_path)


@pytest.mark.parametrize(
    ("proxies", "bad"),
    [
        ("garbage", "garbage"),
        ("10.0.0.0/33", "10.0.0.0/33"),
        ("*", "*"),
        ("127.0.0.1, localhost", "localhost"),
        ("10.0.0.1/8", "10.0.0.1/8"),
    ],
)
def test_a_trusted_proxy_must_be_an_address_or_a_network(monkeypatch, tmp_path, proxies, bad):
    with pytest.raises(ConfigError) as refused:
        Settings.load(env_file=None, data_dir=tmp_path, trusted_proxies=proxies)
    message = str(refused.value)
    assert repr(bad) in message and "proxy's address" in message, message
    assert "\n" not in message, message
    monkeypatch.setenv("CHATBOT_TRUSTED_PROXIES", proxies)
    with pytest.raises(ConfigError, match="CHATBOT_TRUSTED_PROXIES"):
        Settings.load(env_file=None, data_dir=tmp_path)


def test_trusted_proxies_take_addresses_and_networks_of_both_families(tmp_path):
    given = "127.0.0.1, 10.0.0.0/8,::1, fd00::/8"
    s = Settings.load(env_file=None, data_dir=tmp_path, trusted_proxies=given)
    assert s.trusted_proxies == given, "each address and network is kept as given"
