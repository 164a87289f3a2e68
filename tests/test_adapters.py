"""The package reads top to bottom (short modules and functions) and `serve` uses only the
public API."""

from __future__ import annotations

import ast
from pathlib import Path

import chatbot

PACKAGE = Path(chatbot.__file__).parent
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500
# Modules `serve` may import besides the package's exports and its own: errors, settings and the
# value types the exports return.
PUBLIC_MODULES = {"chatbot", "chatbot.errors", "chatbot.settings", "chatbot.values"}
# The evaluation reads question files with the JSON Lines reader that record collections use, so
# a bad line is reported the same way in both.
# The API counts the tokens of the offline model, which reports none, with the tokenizer the
# prompt budget uses, so `usage` means the same whichever model answers.
KNOWN_INTERNAL = {
    ("serve/evaluate.py", "chatbot.index.records", "json_objects"),
    ("serve/openai_api/format.py", "chatbot.text.tokens", "count_tokens"),
}
# The Chatbot's components: the serving code goes through its methods instead.
INTERNALS = {"store", "retriever", "llm"}


def _modules(under: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in under.rglob("*.py") if "_model" not in p.parts)


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_every_module_is_at_most_500_lines():
    long = [
        f"chatbot/{_name(p)} ({n} lines)"
        for p in _modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, f"split these modules into ones of at most {MAX_MODULE_LINES} lines: {long}"


def test_every_function_in_the_package_is_at_most_60_lines():
    long = [
        f"chatbot/{_name(p)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for p in _modules()
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, (
        f"split these functions into ones of {MAX_FUNCTION_LINES} lines at most: {long}"
    )


def _internal_uses(path: Path) -> list[str]:
    name = _name(path)
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            public = module in PUBLIC_MODULES or module.startswith("chatbot.serve")
            for alias in node.names:
                if module == "chatbot" and alias.name not in chatbot.__all__:
                    public = False
                if not public and (name, module, alias.name) not in KNOWN_INTERNAL:
                    if module.startswith("chatbot") or node.level:
                        found.append(f"{name}:{node.lineno} from {module} import {alias.name}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            private = node.attr.startswith("_") or node.attr in INTERNALS
            if node.value.id == "bot" and private:
                found.append(f"{name}:{node.lineno} bot.{node.attr}")
    return found


def test_serving_code_uses_only_the_public_api():
    found = [use for p in _modules(PACKAGE / "serve") for use in _internal_uses(p)]
    assert not found, (
        "chatbot.serve should import from `chatbot` (its exports), chatbot.errors, "
        "chatbot.settings or chatbot.values, and call the Chatbot's methods, not its components: "
        f"{found}"
    )
