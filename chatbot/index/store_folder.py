"""The embedded Chroma store's folder: opened, recognised as damaged or read-only, moved aside."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from chatbot.errors import StoreDamagedError, StoreError, StoreReadOnlyError
from chatbot.settings import Settings

log = logging.getLogger(__name__)

DB = "chroma.sqlite3"
# What SQLite (through Chroma's Rust core) says about a file it cannot read as a database.
_DAMAGED = (
    "file is not a database",
    "database disk image is malformed",
    # Chroma's word for a damaged page in its embedded log (SQLite's own error is not passed on).
    "Failed to pull logs from the log store",
)
_READ_ONLY = ("attempt to write a readonly database", "unable to open database file")
_SEGMENT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def folder(settings: Settings) -> Path:
    """Where the embedded store keeps its files."""
    return settings.data_dir / "chroma"


def open_client(settings: Settings, chroma_settings):
    """A PersistentClient on the data directory's store; StoreError if it cannot be opened."""
    import chromadb

    path = folder(settings)
    try:
        path.mkdir(parents=True, exist_ok=True)
        _check_db_present(path, settings)
        with quiet_panics():
            return chromadb.PersistentClient(path=str(path), settings=chroma_settings)
    except BaseException as e:  # a panic in Chroma's Rust core is a BaseException
        error = translate(e, settings)
        if error is None:
            raise
        _forget(path)
        raise error from e


def translate(e: BaseException, settings: Settings) -> StoreError | None:
    """The StoreError explaining a failure of the embedded store, if it is a known one."""
    if isinstance(e, StoreError):
        return e
    if settings.chroma_url or isinstance(e, (KeyboardInterrupt, SystemExit)):
        return None
    path = folder(settings)
    text = str(e)
    damage = next((s for s in _DAMAGED if s in text), None)
    if damage:
        return damaged(path, damage, settings)
    if damage is None and type(e).__module__.startswith("chromadb"):
        # Chroma reports some damaged pages only as its own failure ("Failed to get segments"):
        # SQLite's own check of the file tells damage from other failures.
        damage = _integrity_problem(path / DB)
        if damage:
            return damaged(path, damage, settings)
    read_only = isinstance(e, OSError) and e.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    if read_only or any(s in text for s in _READ_ONLY):
        return StoreReadOnlyError(
            f"Cannot write to {path}: the embedded Chroma store writes to its folder even to "
            f"read it; make {settings.data_dir} writable, or copy it somewhere writable and point "
            "CHATBOT_DATA_DIR (--data-dir) at the copy."
        )
    return None


def damaged(path: Path, reason: str, settings: Settings) -> StoreDamagedError:
    """The error for a damaged database in `path`, naming the file and the way out."""
    return StoreDamagedError(
        f"The Chroma database {path / DB} is damaged ({reason}): run "
        f"`{settings.command('ingest', '--rebuild')} PATH…` with the folders and files it was "
        "built from, to move it aside and index them anew from the embedding cache (or restore "
        "the folder from a backup)."
    )


def move_aside(settings: Settings) -> Path:
    """Rename the damaged store's folder to chroma.broken-<time>, so a new one can be built."""
    path = folder(settings)
    _forget(path)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.broken-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.broken-{stamp}-{n}")
    path.rename(target)
    log.warning(
        "The Chroma database %s was damaged: moved its folder aside to %s; indexing anew.",
        path / DB,
        target,
    )
    return target


def _check_db_present(path: Path, settings: Settings) -> None:
    """A store whose database is missing or empty while its vectors remain has lost its index.

    Chroma would silently start an empty database there, and the next question would index
    the default corpus into it: say so instead.
    """
    db = path / DB
    if (not db.exists() or db.stat().st_size == 0) and any(
        _SEGMENT.fullmatch(p.name) and p.is_dir() for p in path.iterdir()
    ):
        raise damaged(path, "missing" if not db.exists() else "empty", settings)


def _integrity_problem(db: Path) -> str | None:
    """What SQLite's quick check finds wrong with the database file, None when it is sound."""
    if not db.is_file():
        return None
    try:
        with contextlib.closing(
            sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        ) as conn:
            found = conn.execute("PRAGMA quick_check(1)").fetchone()
    except sqlite3.DatabaseError as e:
        return str(e)
    if found and found[0] == "ok":
        return None
    return " ".join(str(found[0] if found else "unreadable").split())


@contextlib.contextmanager
def quiet_panics() -> Iterator[None]:
    """Keep a panic in Chroma's Rust core from printing its backtrace before our message.

    Rust's panic hook writes to file descriptor 2 before Python sees the exception, so the
    message naming the damage would follow a screenful of Rust. What else is written to
    stderr meanwhile is passed on.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    panicked = False
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        except BaseException as e:
            panicked = type(e).__name__ == "PanicException"
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            written = caught.read()
            if written and not panicked:
                os.write(2, written)


def _forget(path: Path) -> None:
    """Drop chromadb's cached client for `path`: after a failed start it would be reused broken."""
    from chromadb.api.shared_system_client import SharedSystemClient

    system = SharedSystemClient._identifier_to_system.pop(str(path), None)
    SharedSystemClient._identifier_to_refcount.pop(str(path), None)
    if system is not None:
        try:
            system.stop()
        except Exception:
            pass  # a system that never started has nothing to stop
