"""What installing the chatbot costs a user: time and disk, from the sdist to a working `chatbot`.

Each run copies the source without the checkout's `chatbot/_model`, builds the sdist, builds the
wheel from it (the build backend fetches the embedding model), and installs that wheel in a fresh
virtual environment with plain `pip install` (one step: no `--no-deps`, nothing else by hand).
pip's own cache is used, as on a developer's machine after a first install; the environment's size
and its largest packages are read from its site-packages.

    nice -n 10 .venv/bin/python benchmarks/bench_install.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "install.json"
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in")
FOLDERS = ("chatbot", "prompts", "corpus", "build_backend")


def _timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def one_run() -> dict:
    """Seconds to build and to install, and the installed environment's size."""
    with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
        src, out, venv = Path(tmp) / "src", Path(tmp) / "dist", Path(tmp) / "venv"
        src.mkdir()
        for name in SOURCES:
            shutil.copy(ROOT / name, src)
        for name in FOLDERS:
            ignore = shutil.ignore_patterns("__pycache__", "_model")
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        sdist_s = _timed([sys.executable, "-m", "build", "-q", "--sdist", "-o", str(out), str(src)])
        (sdist,) = out.glob("*.tar.gz")
        pip = [sys.executable, "-m", "pip", "-q"]
        wheel_s = _timed([*pip, "wheel", "--no-deps", "-w", str(out), str(sdist)])
        (wheel,) = out.glob("*.whl")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        install_s = _timed([str(venv / "bin" / "pip"), "-q", "install", str(wheel)])
        site = next((venv / "lib").glob("python*/site-packages"))
        packages = {p.name: _size(p) for p in site.iterdir() if p.is_dir()}
        largest = sorted(packages.items(), key=lambda kv: -kv[1])[:8]
        version = subprocess.run(
            [str(venv / "bin" / "chatbot"), "--version"], capture_output=True, text=True
        ).stdout.strip()
        return {
            "sdist_s": round(sdist_s, 1),
            "wheel_s": round(wheel_s, 1),
            "install_s": round(install_s, 1),
            "wheel_mb": round(wheel.stat().st_size / 1e6, 1),
            "venv_mb": round(_size(venv) / 1e6),
            "largest_mb": {name: round(size / 1e6) for name, size in largest},
            "torch": (site / "torch").exists(),
            "chatbot --version": version,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [one_run() for _ in range(args.runs)]
    result = {
        "command": f"nice -n 10 .venv/bin/python benchmarks/bench_install.py --runs {args.runs}",
        "runs": runs,
        "median_install_s": statistics.median(r["install_s"] for r in runs),
        "median_wheel_s": statistics.median(r["wheel_s"] for r in runs),
        "cpus": os.cpu_count(),
    }
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
