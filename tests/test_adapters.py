"""The package reads top to bottom (short functions) and its adapters use only the public API."""

from __future__ import annotations

import ast
from pathlib import Path

import chatbot

PACKAGE = Path(chatbot.__file__).parent
ADAPTERS = (
    "cli",
    "terminal",
    "web",
    "webassets",
    "webview",
    "webcite",
    "webdocs",
    "webguard",
    "evaluate",
    "api",
    "apiformat",
    "apirequest",
    "apiresponses",
)
MAX_LINES = 60
# Modules an adapter may import besides the package's exports: errors, settings, other adapters.
PUBLIC_MODULES = {"errors", "settings", *ADAPTERS}
# The evaluation reads question files with the JSON Lines reader that record collections use, so
# a bad line is reported the same way in both.
# The API counts the tokens of the offline model, which reports none, with the tokenizer the
# prompt budget uses, so `usage` means the same whichever model answers.
KNOWN_INTERNAL = {("evaluate", "records", "json_objects"), ("apiformat", "tokens", "count_tokens")}
# The Chatbot's components: an adapter goes through its methods instead.
INTERNALS = {"store", "retriever", "llm"}


def _tree(name: str) -> ast.Module:
    return ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))


def test_every_function_in_the_package_is_at_most_60_lines():
    long = [
        f"chatbot/{name}.py:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for name in sorted(p.stem for p in PACKAGE.glob("*.py"))
        for node in ast.walk(_tree(name))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_LINES
    ]
    assert not long, f"split these functions into ones of at most {MAX_LINES} lines: {long}"


def _internal_uses(name: str) -> list[str]:
    found = []
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for alias in node.names:
                module = node.module or ""
                public = (
                    module in PUBLIC_MODULES
                    if module
                    else alias.name in chatbot.__all__ or alias.name in ADAPTERS
                )
                if not public and (name, module, alias.name) not in KNOWN_INTERNAL:
                    found.append(f"{name}.py:{node.lineno} from .{module} import {alias.name}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            private = node.attr.startswith("_") or node.attr in INTERNALS
            if node.value.id == "bot" and private:
                found.append(f"{name}.py:{node.lineno} bot.{node.attr}")
    return found


def test_adapters_use_only_the_public_api():
    found = [use for name in ADAPTERS for use in _internal_uses(name)]
    assert not found, (
        "adapters should import from `chatbot` (its exports), chatbot.errors or chatbot.settings "
        f"and call the Chatbot's methods, not its components: {found}"
    )
