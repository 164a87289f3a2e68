"""The offline embedding model in a child process, so a large ingest writes while it embeds.

Chroma's upsert, splitting and the keyword index all hold the GIL, so threads cannot overlap them
with embedding: on the 5,365 ICML abstracts they added 9-13% to the model's own time in one
process. A child process embeds batch k+1 while the parent writes batch k (docs/benchmarks.md).

The parent sends pickled lists of texts on the child's stdin and reads pickled replies from its
stdout, one reply per request, in order. The child starts from this file with `python -m`, and
imports only the model code (about 0.7 s), never the caller's `__main__` as multiprocessing would.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from .errors import EmbeddingError

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
    """all-MiniLM-L6-v2 in a child process; `submit` returns a Future of the vectors."""

    def __init__(self, model_dir: Path, threads: int) -> None:
        """Start the child; it loads the model while the caller prepares the first batch."""
        env = dict(os.environ)
        # The child must import this package even when it is not installed (a source checkout).
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-m", __name__, str(model_dir), str(threads)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
        except OSError as e:
            raise EmbeddingError(f"Could not start the embedding process: {e}") from e
        # One thread waits on the pipe (outside the GIL) so the caller can go on writing.
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="embedding-process")

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._child.pid

    def submit(self, texts: Sequence[str]) -> Future:
        """Queue `texts`; the Future gives a float32 array of shape (len(texts), 384)."""
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


def _serve(model_dir: str, threads: int) -> int:
    # Ctrl-C reaches the whole process group; the parent decides what happens, then closes us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests, replies = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but replies may be written to the reply stream
    from .embeddings import MiniLMEmbeddings

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
    sys.exit(_serve(sys.argv[1], int(sys.argv[2])))
