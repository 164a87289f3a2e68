"""Settings, read once from the environment and `.env`; explicit overrides (CLI flags) win.

A frozen dataclass, not pydantic-settings: the variable names (OPENAI_API_KEY beside CHATBOT_*),
blank meaning unset (the server's own key and login of only spaces are refused), a default
read from `.env` (XDG_DATA_HOME) and one ConfigError naming the variable would each need an
override of pydantic-settings, more code than this loader; pydantic's SecretStr keeps the API keys
out of repr, str and f-strings.
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from importlib.resources import files
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from dotenv import dotenv_values
from pydantic import SecretStr

from chatbot.errors import ConfigError


def packaged(name: str) -> Path:
    """The product's own `prompts` or `corpus` folder, wherever the package is installed.

    A wheel or sdist carries the top-level folders inside the package as `chatbot/_data/NAME`
    (pyproject.toml maps them in); a checkout has no `_data`, so its top-level folder is used.
    """
    inside = Path(str(files(__package__))) / "_data" / name
    return inside if inside.is_dir() else Path(__file__).resolve().parent.parent / name


PROMPTS_DIR = packaged("prompts")
CORPUS_DIR = packaged("corpus")
MAX_QUESTION_CHARS = 2000
DEFAULT_COLLECTION = "summaries"
# A list question searches top_k + 3 passages, and a search takes at most 100 (options.MAX_K).
TOP_K_MAX = 97
_NUMBER = (int, float)
# For each number: what a valid value is, and the test it passes (nan passes none of them).
_LIMITS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "top_k": (
        f"a whole number from 1 to {TOP_K_MAX}, leaving room for the 3 more a list question reads",
        lambda v: 1 <= v <= TOP_K_MAX,
    ),
    "chunk_tokens": ("a number of tokens, at least 1", lambda v: v >= 1),
    "min_relevance": ("a score from 0 to 1", lambda v: 0 <= v <= 1),
    "max_question_chars": ("a number of characters, at least 1", lambda v: v >= 1),
    "timeout": ("a number of seconds above 0", lambda v: 0 < v < math.inf),
    "max_retries": ("a number of tries, at least 1", lambda v: v >= 1),
    "context_window": ("a number of tokens, at least 1", lambda v: v >= 1),
    "max_answer_tokens": ("a number of tokens, at least 1", lambda v: v >= 1),
    "max_file_mb": ("a size in MB above 0", lambda v: 0 < v < 1e6),
    "max_pdf_pages": ("a number of pages, at least 1", lambda v: v >= 1),
}


# The server's own credentials. Blank, they would read as "no key" or as one anyone could guess,
# so they are refused wherever they come from, never taken as unset.
_CREDENTIALS = {
    "api_key": "The API key (--api-key or CHATBOT_API_KEY) is empty or only spaces: give it a "
    "real key, or leave both unset to serve on 127.0.0.1 without one.",
    "login": "The login (--auth or CHATBOT_AUTH) is empty or only spaces: give it as "
    "user:password, or leave both unset to serve without a login.",
}


def _default_data_dir(env: dict[str, str]) -> Path:
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "icml-chatbot"


@dataclass(frozen=True)
class Settings:
    """Every knob of the chatbot; the defaults work offline on a fresh machine."""

    data_dir: Path
    corpus_dir: Path = CORPUS_DIR
    prompts_dir: Path = PROMPTS_DIR
    collection: str = DEFAULT_COLLECTION
    chroma_url: str | None = None
    embeddings: str = "minilm"
    embedding_model: str = "text-embedding-3-small"
    embedding_base_url: str | None = None
    embedding_api_key: SecretStr | None = None
    model: str = ""
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    top_k: int = 5
    chunk_tokens: int = 200
    chunk_overlap: int = 30
    # Below this retrieval relevance nothing found is even related, and no model is asked: the
    # floor under which no answerable question of the tuning sets of either corpus falls.
    min_relevance: float = 0.24
    max_question_chars: int = MAX_QUESTION_CHARS
    timeout: float = 60.0
    max_retries: int = 3
    context_window: int | None = None
    max_answer_tokens: int = 512
    max_file_mb: float = 20.0
    max_pdf_pages: int = 500
    # Where `chatbot ingest` fetches arXiv links from (`abs/ID` and `pdf/ID` become `BASE/pdf/ID`).
    arxiv_url: str = "https://arxiv.org"
    # The key API clients of `chatbot serve` must send; required when it serves other machines.
    api_key: SecretStr | None = None
    # Who judges whether an answer's sentences are backed by their sources: "lexical" (figures,
    # names, negation and MiniLM similarity) or "model" (the configured model, one extra call).
    support_check: str = "lexical"
    # The web UI's login as "user:password" (from the environment, it stays out of `ps`).
    login: SecretStr | None = None
    # Proxies (addresses or networks, comma-separated) whose X-Forwarded-For names the client.
    trusted_proxies: str | None = None

    # Environment variable for each field; the API key names are the ones every OpenAI tool uses.
    ENV: ClassVar[dict[str, str]] = {
        "data_dir": "CHATBOT_DATA_DIR",
        "corpus_dir": "CHATBOT_CORPUS_DIR",
        "prompts_dir": "CHATBOT_PROMPTS_DIR",
        "collection": "CHATBOT_COLLECTION",
        "chroma_url": "CHATBOT_CHROMA_URL",
        "embeddings": "CHATBOT_EMBEDDINGS",
        "embedding_model": "CHATBOT_EMBEDDING_MODEL",
        "embedding_base_url": "CHATBOT_EMBEDDING_BASE_URL",
        "embedding_api_key": "CHATBOT_EMBEDDING_API_KEY",
        "model": "CHATBOT_MODEL",
        "openai_api_key": "OPENAI_API_KEY",
        "openai_base_url": "OPENAI_BASE_URL",
        "top_k": "CHATBOT_TOP_K",
        "chunk_tokens": "CHATBOT_CHUNK_TOKENS",
        "chunk_overlap": "CHATBOT_CHUNK_OVERLAP",
        "min_relevance": "CHATBOT_MIN_RELEVANCE",
        "max_question_chars": "CHATBOT_MAX_QUESTION_CHARS",
        "timeout": "CHATBOT_TIMEOUT",
        "max_retries": "CHATBOT_MAX_RETRIES",
        "context_window": "CHATBOT_CONTEXT_WINDOW",
        "max_answer_tokens": "CHATBOT_MAX_ANSWER_TOKENS",
        "max_file_mb": "CHATBOT_MAX_FILE_MB",
        "max_pdf_pages": "CHATBOT_MAX_PDF_PAGES",
        "arxiv_url": "CHATBOT_ARXIV_URL",
        "api_key": "CHATBOT_API_KEY",
        "support_check": "CHATBOT_SUPPORT_CHECK",
        "login": "CHATBOT_AUTH",
        "trusted_proxies": "CHATBOT_TRUSTED_PROXIES",
    }

    @classmethod
    def load(cls, env_file: str | Path | None = ".env", **overrides: Any) -> Settings:
        """Read `.env`, then the environment (which wins), then `overrides` (which win over all)."""
        env: dict[str, str] = {}
        if env_file is not None and Path(env_file).is_file():
            env.update({k: v for k, v in dotenv_values(env_file).items() if v is not None})
        env.update(os.environ)
        values: dict[str, Any] = {}
        for f in fields(cls):
            name = cls.ENV.get(f.name)
            raw = env.get(name) if name else None
            # An empty line unsets, as everywhere; the server's key or login of only spaces is
            # kept, to be refused below.
            if raw is not None and (raw.strip() != "" or (f.name in _CREDENTIALS and raw)):
                values[f.name] = _convert(f.name, f.type, raw.strip(), name)
        values.setdefault("data_dir", _default_data_dir(env))
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def __post_init__(self) -> None:
        # Keys given as text (a flag, a test) are wrapped too; folders may start with "~".
        for key in ("openai_api_key", "embedding_api_key", "api_key", "login"):
            value = getattr(self, key)
            text = value.get_secret_value() if isinstance(value, SecretStr) else value
            if key in _CREDENTIALS and text is not None and not text.strip():
                raise ConfigError(_CREDENTIALS[key])
            if isinstance(value, str):
                object.__setattr__(self, key, SecretStr(value) if value else None)
        for key in ("data_dir", "corpus_dir", "prompts_dir"):
            object.__setattr__(self, key, Path(getattr(self, key)).expanduser())
        if self.chroma_url:
            object.__setattr__(self, "chroma_url", chroma_server_url(self.chroma_url))
        self.check()

    def check(self) -> None:
        """Reject values and combinations that cannot work, with the fix in the message."""
        if self.support_check not in ("lexical", "model"):
            raise ConfigError(
                f"CHATBOT_SUPPORT_CHECK={self.support_check!r} is not known: use 'lexical' (the "
                "default) or 'model' (the configured model judges each answer sentence)."
            )
        if self.embeddings not in ("minilm", "openai"):
            raise ConfigError(
                f"CHATBOT_EMBEDDINGS={self.embeddings!r} is not known: use 'minilm' (offline, the "
                "default) or 'openai' (an OpenAI-compatible /v1/embeddings endpoint)."
            )
        if len(self.collection) < 3:
            raise ConfigError(
                f"Collection name {self.collection!r} is too short: Chroma needs 3 or more "
                "characters."
            )
        for name, (allowed, ok) in _LIMITS.items():
            value = getattr(self, name)
            if value is None and name == "context_window":
                continue
            if isinstance(value, bool) or not isinstance(value, _NUMBER) or not ok(value):
                default = self.__dataclass_fields__[name].default
                raise ConfigError(
                    f"{self.ENV[name]}={_shown(value)} must be {allowed} (default: "
                    f"{_shown(default)}); fix it in the environment or .env."
                )
        if not 0 <= self.chunk_overlap < self.chunk_tokens:
            raise ConfigError(
                f"CHATBOT_CHUNK_OVERLAP={self.chunk_overlap} must be ≥ 0 and smaller than "
                f"CHATBOT_CHUNK_TOKENS={self.chunk_tokens}."
            )
        _check_proxies(self.trusted_proxies or "")

    def with_(self, **changes: Any) -> Settings:
        """A checked copy with some fields changed (None values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @property
    def max_file_bytes(self) -> int:
        """The largest document file ingest accepts, in bytes."""
        return int(self.max_file_mb * 1024 * 1024)

    @property
    def uses_offline_model(self) -> bool:
        """True when the offline model is asked for, or no real model is configured."""
        return self.model_name == "offline"

    @property
    def model_name(self) -> str:
        """The model in use: CHATBOT_MODEL, else gpt-4o-mini when a key or server is set."""
        if self.model.strip().lower() == "offline":
            return "offline"
        if not (self.openai_api_key or self.openai_base_url):
            return "offline"
        return self.model.strip() or "gpt-4o-mini"

    @property
    def model_label(self) -> str:
        """What `info` and the UI show: the model name and where it points, never the key."""
        if self.uses_offline_model:
            return "offline (extractive, no network)"
        where = safe_url(self.openai_base_url or "https://api.openai.com/v1")
        return f"{self.model_name} at {where}"

    def command(self, *words: str) -> str:
        """The `chatbot` command line, as a message tells the user to run it: this data folder
        (unless the default one), Chroma server and collection, then `words`."""
        import shlex

        args = ["chatbot"]
        if self.data_dir != _default_data_dir(dict(os.environ)):
            args += ["--data-dir", str(self.data_dir)]
        if self.chroma_url:
            args += ["--chroma-url", safe_url(self.chroma_url)]
        return shlex.join([*args, "--collection", self.collection, *words])


def chroma_server_url(url: str) -> str:
    """`url` as Chroma's client reads it: `localhost:8000` becomes `http://localhost:8000`.

    Chroma's own docs write the server as `localhost:8000`; read as a URL, "localhost" would be
    its scheme and the server reported unreachable. Anything still not an http(s) address with a
    host is a ConfigError showing the form.
    """
    given = url.strip()
    if "://" not in given:
        given = f"http://{given}"
    parts = urlsplit(given)
    try:
        parts.port  # noqa: B018 (reading it checks it: "host:abc" raises)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        raise ConfigError(
            f"CHATBOT_CHROMA_URL={url!r} is not a Chroma server address: give it as "
            "http://HOST:PORT (or HOST:PORT), e.g. http://127.0.0.1:8000."
        )
    return given.rstrip("/")


def safe_url(url: str) -> str:
    """`url` without user, password or query, fit to show in a message or a log."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def _check_proxies(proxies: str) -> None:
    """Refuse a trusted proxy that is not an IP address or network, with the fix in the message.

    The server believes X-Forwarded-For only from these. uvicorn takes '*' as every client and
    silently never matches a value it cannot parse, so both are refused here, as is a network
    that holds every address.
    """
    fix = "name the proxy's address (e.g. 127.0.0.1) or network (e.g. 10.0.0.0/8), comma-separated"
    for given in proxies.split(","):
        proxy = given.strip()
        if not proxy:
            continue
        where = f"CHATBOT_TRUSTED_PROXIES (--trusted-proxy) {proxy!r}"
        try:
            network = ipaddress.ip_network(proxy)  # an address is a network of one
        except ValueError:
            network = None
        if proxy == "*" or (network is not None and network.prefixlen == 0):
            raise ConfigError(f"{where} would believe every client's X-Forwarded-For: {fix}.")
        if network is not None:
            continue
        try:
            network = ipaddress.ip_network(proxy, strict=False)
        except ValueError:
            raise ConfigError(f"{where} is not an IP address or network: {fix}.") from None
        # uvicorn reads 10.0.0.1/8 as no network at all: the proxy would never match.
        raise ConfigError(f"{where} has host bits set: {fix}; as a network: {network}.")


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _convert(name: str, type_: Any, raw: str, env_name: str | None) -> Any:
    kind = str(type_)
    try:
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError as e:
        number = "a whole number" if kind.startswith("int") else "a number"
        raise ConfigError(
            f"{env_name}={raw!r} is not {number}; fix it in the environment or .env."
        ) from e
    return raw
