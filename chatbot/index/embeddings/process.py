"""The offline embedding model in a child process, so a large ingest writes while it embeds.

Chroma's upsert, splitting and the keyword index all hold the GIL, so threads cannot overlap them
with embedding: on the 5,365 ICML abstracts they added 9-13% to the model's own time in one
process. A child process embeds batch k+1 while the parent writes batch k (docs/benchmarks.md).

`EmbeddingProcess` is the parent's side, an `Embedder` (store.py) like the in-process one;
`ingest.embedder_for` picks between them. The child imports the model; the model's module
knows nothing of this one.

The parent sends pickled lists of texts on the child's stdin and reads pickled replies from its
stdout, one reply per request, in order. The child starts from this file with `python -m`, and
imports only the model code (about 0.7 s), never the caller's `__main__` as multiprocessing would.
The child dies with its parent, even one killed with SIGKILL: an orphan would go on embedding a
batch nobody reads, on a core the next ingest needs.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from chatbot.errors import EmbeddingError

_LENGTH = struct.Struct("<Q")


def _send(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError
    (size,) = _LENGTH.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class EmbeddingProcess:
    """all-MiniLM-L6-v2 in a child process; `submit` returns a Future of the vectors.

    The child starts at the first `submit`, so an ingest whose passages are all cached starts
    none. On Linux the child ends with the thread that starts it: submit from a thread that
    outlives the work (the caller's own, as `ingest.sync` does).
    """

    def __init__(self, model_dir: Path, threads: int) -> None:
        self._model_dir, self._threads = model_dir, threads
        self._child: subprocess.Popen | None = None
        # One thread waits on the pipe (outside the GIL) so the caller can go on writing.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="embedding-process")

    def _start(self) -> subprocess.Popen:
        env = dict(os.environ)
        # The child must import this package even when it is not installed (a source checkout).
        root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        args = [str(self._model_dir), str(self._threads), str(os.getpid())]
        try:
            return subprocess.Popen(
                [sys.executable, "-m", __name__, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
        except OSError as e:
            raise EmbeddingError(f"Could not start the embedding process: {e}") from e

    @property
    def pid(self) -> int | None:
        """The child's process id (None until the first `submit`)."""
        return self._child.pid if self._child is not None else None

    def submit(self, texts: Sequence[str]) -> Future:
        """Queue `texts`; the Future gives a float32 array of shape (len(texts), 384)."""
        if self._child is None:
            self._child = self._start()
        return self._pool.submit(self._call, list(texts))

    def _call(self, texts: list[str]):
        try:
            _send(self._child.stdin, texts)
            status, value = _receive(self._child.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as e:
            try:  # the pipe can close a moment before the exit status is there
                code = self._child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            raise EmbeddingError(
                f"The embedding process stopped (exit code {code}); its messages, if any, are "
                "above. Run the ingest again: what was already written is kept."
            ) from e
        if status != "ok":
            raise EmbeddingError(value)
        return value

    def close(self, *, kill: bool = False) -> None:
        """Stop the child: at once when `kill`, else once it has answered every request."""
        if self._child is None:
            self._pool.shutdown()
            return
        if kill:
            self._child.kill()
        try:
            self._child.stdin.close()
        except OSError:
            pass  # the child is gone already
        self._pool.shutdown(wait=True, cancel_futures=True)
        try:
            self._child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        self._child.stdout.close()


# Linux's prctl(2) option: the kernel sends the child this signal when its parent dies.
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Exit at once when `parent` dies, however it dies (SIGKILL included)."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
            if os.getppid() != parent:  # it died before the request took effect
                os._exit(1)
            return
    # Elsewhere a thread watches for the parent to go: the child is then adopted by another.
    threading.Thread(target=_watch, args=(parent,), name="parent-watch", daemon=True).start()


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.25)
    os._exit(1)


def _serve(model_dir: str, threads: int, parent: int) -> int:
    _die_with(parent)
    # Ctrl-C reaches the whole process group; the parent decides what happens, then closes us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but replies may be written to the reply stream
    from chatbot.index.embeddings.minilm import MiniLMEmbeddings

    problem = ""
    try:
        model = MiniLMEmbeddings(model_dir, threads)
        model._get_model()
    except EmbeddingError as e:
        problem = str(e)
    while True:
        try:
            texts = _receive(requests)
        except EOFError:
            return 0
        try:
            if problem:
                raise EmbeddingError(problem)
            reply = ("ok", model.encode(texts))
        except EmbeddingError as e:
            reply = ("error", str(e))
        except Exception as e:  # the parent shows it; a traceback here would say no more
            reply = ("error", f"The embedding process failed: {type(e).__name__}: {e}")
        try:
            _send(replies, reply)
        except BrokenPipeError:
            return 0  # the parent stopped waiting


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
