"""The `chatbot` command: a thin layer that reads input, calls the API and prints the result."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .errors import ChatbotError


def _settings(args: argparse.Namespace):
    from .settings import Settings

    return Settings.load(
        data_dir=args.data_dir,
        collection=args.collection,
        model=args.model,
        chroma_url=args.chroma_url,
    )


def _bot(args: argparse.Namespace):
    from .qa import Chatbot

    return Chatbot(_settings(args))


def _print_sources(answer, out=sys.stdout) -> None:
    if not answer.citations:
        return
    print("\nSources:", file=out)
    for c in answer.citations:
        paper = f" — {c.paper}" if c.paper else ""
        print(f"  [{c.n}] {c.title}{paper} ({c.doc_id}, score {c.score:.2f})", file=out)
        if c.url:
            print(f"      {c.url}", file=out)


def cmd_ingest(args: argparse.Namespace) -> int:
    bot = _bot(args)
    report = bot.ingest(
        args.paths or None, progress=False if args.quiet else None, rebuild=args.rebuild
    )
    for problem in report.problems:
        print(f"skipped {problem}", file=sys.stderr)
    print(str(report))
    return 1 if report.problems else 0


def cmd_ask(args: argparse.Namespace) -> int:
    bot = _bot(args)
    if args.json:
        answer = bot.ask(args.question, k=args.k)
        print(json.dumps(answer.to_dict(), ensure_ascii=False, indent=2))
        return 0
    stream = bot.stream(args.question, k=args.k)
    for piece in stream:
        print(piece, end="", flush=True)
    print()
    _print_sources(stream.answer)
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    bot = _bot(args)
    history: list[dict[str, str]] = []
    interactive = sys.stdin.isatty()
    if interactive:
        print(
            f"Ask about the ICML 2025 papers ({bot.settings.model_label}). Empty line or Ctrl-D quits."
        )
    while True:
        try:
            question = input("> " if interactive else "")
        except EOFError:
            break
        if not question.strip():
            if interactive:
                break
            continue
        try:
            stream = bot.stream(question, history)
            for piece in stream:
                print(piece, end="", flush=True)
            print()
            _print_sources(stream.answer)
            print()
        except ChatbotError as e:
            # One bad question should not end the conversation.
            print(f"error: {e}", file=sys.stderr)
            continue
        history += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": stream.answer.text},
        ]
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    info = _bot(args).info()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(map(len, info))
        for key, value in info.items():
            print(f"{key.replace('_', ' '):<{width}}  {value}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with one sub-command per job."""
    parser = argparse.ArgumentParser(
        prog="chatbot", description="Ask questions about ICML 2025 papers, with cited answers."
    )
    parser.add_argument("--data-dir", help="where the index lives (CHATBOT_DATA_DIR)")
    parser.add_argument("--collection", help="which collection to use (CHATBOT_COLLECTION)")
    parser.add_argument("--model", help="model name, or 'offline' (CHATBOT_MODEL)")
    parser.add_argument("--chroma-url", help="use a Chroma server (CHATBOT_CHROMA_URL)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Callable[[argparse.Namespace], int], help_: str):
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(func=func)
        return p

    p = add("ingest", cmd_ingest, "index documents (default: the corpus folder), incrementally")
    p.add_argument("paths", nargs="*", help="files or folders of .md/.txt documents")
    p.add_argument("--rebuild", action="store_true", help="drop the collection and index anew")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = add("ask", cmd_ask, "answer one question")
    p.add_argument("question")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.add_argument("-k", type=int, default=None, help="passages to retrieve")

    add("chat", cmd_chat, "a conversation in the terminal (follow-up questions work)")

    p = add("info", cmd_info, "show the data directory, what is indexed and the models in use")
    p.add_argument("--json", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run a sub-command; errors become one line on stderr and a non-zero exit."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ChatbotError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "interrupted: run the command again to finish (nothing is half-indexed).",
            file=sys.stderr,
        )
        return 130
    except Exception as e:
        if args.debug:
            raise
        print(f"error: unexpected {type(e).__name__}: {e} (--debug shows details)", file=sys.stderr)
        return 1


def run() -> Any:
    """Console-script wrapper."""
    sys.exit(main())
