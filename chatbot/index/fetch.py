"""PDFs named by a link (https://…/paper.pdf, arXiv abs/ and pdf/ pages) fetched into the data
directory, where ingest reads them like any file."""

from __future__ import annotations

import re
import unicodedata
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from chatbot.values import Problem

FOLDER = "papers"  # under the data directory
_ARXIV = re.compile(
    r"^https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf)/(?P<id>[A-Za-z.-]*/?\d{4}\.?\d{4,5}(?:v\d+)?)"
    r"(?:\.pdf)?/?(?:[?#].*)?$"
)
_CHUNK = 1 << 16


def is_link(path: str | Path) -> bool:
    """True when `path` is a web link rather than a file."""
    return isinstance(path, str) and path.lower().startswith(("https://", "http://"))


def safe_name(name: str, suffix: str = "") -> str:
    """A file name that is safe in any folder: letters, digits, dots, dashes; no path parts."""
    name = unicodedata.normalize("NFKD", Path(name.replace("\\", "/")).name)
    name = name.encode("ascii", "ignore").decode()
    stem, dot, ext = name.rpartition(".")
    if not dot:
        stem, ext = name, ""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", stem).strip("-._")[:80] or "document"
    ext = re.sub(r"[^A-Za-z0-9]", "", ext).lower()[:10]
    ext = suffix.lstrip(".") if suffix and ext != suffix.lstrip(".") else ext
    return f"{stem}.{ext}" if ext else stem


def pdf_link(url: str, arxiv_base: str) -> tuple[str, str]:
    """The URL to download and the file name to keep: arXiv pages become their PDF."""
    if match := _ARXIV.match(url):
        paper = match.group("id")
        # Not safe_name: the dot in "2401.01234" is part of the id, not a suffix.
        name = "arxiv-" + re.sub(r"[^A-Za-z0-9.-]+", "-", paper).strip(".-") + ".pdf"
        return f"{arxiv_base.rstrip('/')}/pdf/{paper}", name
    name = unquote(urlsplit(url).path.rstrip("/").rpartition("/")[2]) or urlsplit(url).netloc
    return url, safe_name(name, ".pdf")


def fetch(url: str, folder: Path, *, max_bytes: int, timeout: float, arxiv_base: str) -> Path:
    """Download the PDF at `url` into `folder`; raises ValueError naming why it could not be."""
    link, name = pdf_link(url, arxiv_base)
    request = urllib.request.Request(link, headers={"User-Agent": "icml-chatbot"})
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    partial = target.with_suffix(".part")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            size = int(reply.headers.get("Content-Length") or 0)
            if size > max_bytes:
                raise ValueError(_too_big(size, max_bytes))
            got = 0
            with partial.open("wb") as out:
                while chunk := reply.read(_CHUNK):
                    got += len(chunk)
                    if got > max_bytes:
                        raise ValueError(_too_big(got, max_bytes))
                    if got == len(chunk) and not chunk.lstrip().startswith(b"%PDF-"):
                        kind = reply.headers.get_content_type()
                        raise ValueError(f"is not a PDF (the server sent {kind})")
                    out.write(chunk)
        partial.replace(target)
    except urllib.error.HTTPError as e:
        raise ValueError(f"could not be fetched: the server answered {e.code} {e.reason}") from e
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", None) or e
        raise ValueError(
            f"could not be fetched ({reason}): check the link and the network, or download the "
            "PDF and ingest the file"
        ) from e
    finally:
        partial.unlink(missing_ok=True)
    return target


def _too_big(size: int, max_bytes: int) -> str:
    return (
        f"is over the {max_bytes / 2**20:g} MB limit ({size / 2**20:.1f} MB or more): raise "
        "CHATBOT_MAX_FILE_MB to fetch it"
    )


def localise(
    paths: Iterable[str | Path],
    data_dir: Path,
    *,
    max_bytes: int,
    timeout: float,
    arxiv_base: str,
) -> tuple[list[str | Path], list[Problem]]:
    """`paths` with each link replaced by the file it was fetched into; failed links as Problems."""
    local: list[str | Path] = []
    problems: list[Problem] = []
    for path in paths:
        if not is_link(path):
            local.append(path)
            continue
        try:
            local.append(
                fetch(
                    str(path),
                    data_dir / FOLDER,
                    max_bytes=max_bytes,
                    timeout=timeout,
                    arxiv_base=arxiv_base,
                )
            )
        except ValueError as e:
            problems.append(Problem(str(path), str(e)))
    return local, problems
