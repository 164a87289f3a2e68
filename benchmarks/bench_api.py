"""The OpenAI-compatible API under load: requests/s and p50/p95 latency, 20 concurrent clients.

Starts `chatbot serve --api-only` (offline model) as its own process on a free port, then runs
`--clients` threads, each with its own `openai` client, asking `--per-client` questions in turn,
whole (`stream=false`) or streamed (`--stream`: also the time to the first piece). Run from the
repository root:

    nice -n 10 .venv/bin/python benchmarks/bench_api.py --runs 5 \
        --out benchmarks/results/api.json

The data directory (default: a fresh one under /tmp) is indexed on the first start.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import emit
from openai import OpenAI

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = [
    "What is generative social choice?",
    "Do AI agent benchmarks reflect reality?",
    "How do transformers act as associative memories?",
    "Are deep ensembles better than one large model?",
    "Can small language models solve olympiad math problems?",
    "How can collectives influence AI platforms?",
    "Why are deep ensembles described as an illusion?",
    "How long do zeppelin hangar acoustics echo?",  # abstains: no model call
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data_dir: Path, port: int) -> subprocess.Popen:
    """`chatbot serve --api-only` on 127.0.0.1:port, once it says it is serving."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHATBOT_", "OPENAI_"))}
    env.update(CHATBOT_DATA_DIR=str(data_dir), CHATBOT_MODEL="offline")
    command = [sys.executable, "-m", "chatbot", "serve", "--api-only", "--port", str(port)]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "served at" not in line:
        proc.kill()
        raise SystemExit(f"the server did not start: {line!r}")
    return proc


def ask(client: OpenAI, question: str, stream: bool) -> tuple[float, float | None]:
    """Seconds to the whole reply, and to the first piece when streamed."""
    start = time.perf_counter()
    messages = [{"role": "user", "content": question}]
    if not stream:
        reply = client.chat.completions.create(model="icml-chatbot", messages=messages)
        assert reply.choices[0].message.content, "an empty reply"
        return time.perf_counter() - start, None
    first = None
    for chunk in client.chat.completions.create(
        model="icml-chatbot", messages=messages, stream=True
    ):
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - start
    return time.perf_counter() - start, first


def one_run(base: str, clients: int, per_client: int, stream: bool) -> dict:
    """Every client asks its questions in turn; latencies and throughput of the whole run."""
    latencies: list[float] = []
    firsts: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client_loop(n: int) -> None:
        client = OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=120)
        for i in range(per_client):
            question = QUESTIONS[(n + i) % len(QUESTIONS)]
            try:
                total, first = ask(client, question, stream)
            except Exception as e:  # counted, so a failing run is visible in the result
                with lock:
                    errors.append(f"{type(e).__name__}: {e}")
                continue
            with lock:
                latencies.append(total)
                if first is not None:
                    firsts.append(first)

    threads = [threading.Thread(target=client_loop, args=(n,)) for n in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    result = {
        "requests": len(latencies),
        "errors": len(errors),
        "wall_s": round(wall, 2),
        "requests_per_s": round(len(latencies) / wall, 2),
        **percentiles("latency", latencies),
    }
    if firsts:
        result.update(percentiles("first_piece", firsts))
    if errors:
        result["first_error"] = errors[0]
    return result


def percentiles(name: str, seconds: list[float]) -> dict:
    """p50 and p95 of `seconds`, in milliseconds."""
    cuts = statistics.quantiles(seconds, n=20, method="inclusive")
    return {f"{name}_p50_ms": round(cuts[9] * 1000, 1), f"{name}_p95_ms": round(cuts[18] * 1000, 1)}


def main() -> None:
    """Print each run's figures and the medians over runs, as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--per-client", type=int, default=10)
    parser.add_argument("--stream", action="store_true", help="streamed replies")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="bench-api-"))
    port = free_port()
    server = start_server(data_dir, port)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        one_run(base, 2, 2, args.stream)  # warm-up: models and index loaded in the server
        runs = []
        for _ in range(args.runs):
            runs.append(one_run(base, args.clients, args.per_client, args.stream))
            print(runs[-1], flush=True)
    finally:
        server.terminate()
        server.wait(30)
    keys = [k for k in runs[0] if k.endswith(("_ms", "_per_s"))]
    result = {
        "command": " ".join(sys.argv),
        "clients": args.clients,
        "requests_per_run": args.clients * args.per_client,
        "stream": args.stream,
        "model": "offline",
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "runs": runs,
        "median_of_runs": {k: statistics.median(r[k] for r in runs) for k in keys},
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
