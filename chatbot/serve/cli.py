"""The `chatbot` command: a thin layer that reads input, calls the API and prints the result."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

from chatbot import __version__
from chatbot.errors import ChatbotError, ConfigError
from chatbot.serve.terminal import print_stream, safe_json, say

_UNDECODED = re.compile("[\ud800-\udfff]+")


def _settings(args: argparse.Namespace):
    from chatbot.settings import Settings

    return Settings.load(
        data_dir=args.data_dir,
        collection=args.collection,
        model=args.model,
        chroma_url=args.chroma_url,
        api_key=getattr(args, "api_key", None),
        trusted_proxies=getattr(args, "trusted_proxy", None),
    )


# Commands after which, unless they changed the index, the process may skip interpreter
# teardown (an unchanged re-ingest writes nothing).
READ_ONLY = frozenset({"ask", "retrieve", "info", "ingest"})
_bots: list[Any] = []
_command: str | None = None


def _bot(args: argparse.Namespace):
    from chatbot import Chatbot

    bot = Chatbot(_settings(args))
    _bots.append(bot)
    return bot


class _Terminated(KeyboardInterrupt):
    """SIGTERM, stopping an ingest the way Ctrl-C does: its child process ends, writes are kept."""


def _terminate(signum: int, frame: Any) -> None:
    raise _Terminated


def cmd_ingest(args: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    bot = _bot(args)
    from chatbot import Fields

    report = bot.ingest(
        args.paths or None,
        progress=False if args.quiet else None,
        rebuild=args.rebuild,
        fields=Fields(args.id_field, args.title_field, args.text_field),
        replace=args.replace,
        drop=args.yes,
    )
    for problem in report.problems:
        say(f"skipped {problem}", file=sys.stderr)
    say(str(report))
    return 1 if report.problems else 0


def _text(value: str, what: str) -> str:
    """`value` from the command line or stdin, each run of bytes that are not UTF-8 as one �."""
    # Python keeps undecodable input bytes as lone surrogates, which no tokenizer accepts.
    fixed = _UNDECODED.sub("\ufffd", value)
    if fixed != value:
        warning = f"warning: {what} held bytes that are not UTF-8; each run is shown as �."
        print(warning, file=sys.stderr)
    return fixed


def _where(args: argparse.Namespace) -> dict | None:
    from chatbot import parse_where

    return parse_where([_text(c, "--where") for c in args.where] if args.where else None)


def cmd_ask(args: argparse.Namespace) -> int:
    where = _where(args)
    question = _text(args.question, "the question")
    bot = _bot(args)
    if args.json:
        answer = bot.ask(question, k=args.k, where=where)
        print(safe_json(answer.to_dict(), indent=2))
        return 0
    print_stream(bot.stream(question, k=args.k, where=where), ChatbotError)
    return 0


def cmd_retrieve(args: argparse.Namespace) -> int:
    where = _where(args)
    passages = _bot(args).retrieve(_text(args.query, "the query"), k=args.k, where=where)
    if args.json:
        keys = ("doc_id", "title", "score", "text", "metadata")
        rows = [{key: getattr(p, key) for key in keys} for p in passages]
        print(safe_json(rows, indent=2))
    elif not passages:
        # An empty answer on stdout would look like a search that failed to run.
        say("No passage matches the query (or its --where filter).", file=sys.stderr)
    for n, p in enumerate(passages if not args.json else (), 1):
        say(f"[{n}] {p.doc_id} (score {p.score:.2f}) {p.title}")
        say(f"    {p.text[:200]}{'…' if len(p.text) > 200 else ''}")
    return 0 if passages else 1


def cmd_eval(args: argparse.Namespace) -> int:
    from chatbot.serve.evaluate import evaluate, load_questions

    questions = load_questions(args.questions)
    where = _where(args)
    report = evaluate(_bot(args), questions, k=args.k, where=where)
    for warning in report.warnings:
        say(f"warning: {warning}", file=sys.stderr)
    say(report.table())
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report.to_dict(), f, ensure_ascii=False, indent=2)
        print(f"\nwrote {args.out}")
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    bot = _bot(args)
    history: list[dict[str, str]] = []
    interactive = sys.stdin.isatty()
    if hasattr(sys.stdin, "reconfigure"):
        # A line that is not UTF-8 is read with its bad bytes marked, not the end of the chat.
        sys.stdin.reconfigure(errors="surrogateescape")
    if interactive:
        label = bot.settings.model_label
        print(f"Ask about the ICML 2025 papers ({label}). Empty line or Ctrl-D quits.")
    while True:
        try:
            question = input("> " if interactive else "")
        except EOFError:
            break
        if not question.strip():
            if interactive:
                break
            continue
        question = _text(question, "the line")
        try:
            stream = bot.stream(question, history)
            print_stream(stream, ChatbotError)
            print()
        except ChatbotError as e:
            # One bad question should not end the conversation.
            say(f"error: {e}", file=sys.stderr)
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
            if isinstance(value, dict):  # documents per folder: one line each
                lines = [f"{where} ({n} document{'s'[: n != 1]})" for where, n in value.items()]
                lines = lines or ["none"]
                value = f"\n{'':<{width}}  ".join(lines)
            say(f"{key.replace('_', ' '):<{width}}  {value}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    if args.api_only:
        from chatbot.serve.openai_api import routes as api

        if args.auth:
            raise ConfigError("--auth is the web UI's login: protect the API with --api-key KEY.")
        api.serve(_bot(args), host=args.host, port=args.port)
        return 0
    from chatbot.serve.web import app as web

    # Check --auth before loading anything, so a typo fails at once.
    auth = web.parse_auth(args.auth)
    web.serve(_bot(args), host=args.host, port=args.port, auth=auth)
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
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_ingest(sub)
    _add_ask(sub)
    _add_retrieve(sub)
    _add_eval(sub)
    _add(sub, "chat", cmd_chat, "a conversation in the terminal (follow-up questions work)")
    info = "show the data directory, what is indexed and the models in use"
    _add(sub, "info", cmd_info, info).add_argument("--json", action="store_true")
    _add_serve(sub)
    return parser


_WHERE_HELP = "only passages whose metadata match, e.g. year=2023 (repeat to AND)"


def _add(
    sub: Any, name: str, func: Callable[[argparse.Namespace], int], help_: str
) -> argparse.ArgumentParser:
    """A sub-command `name` that runs `func`, described by `help_`."""
    p = sub.add_parser(name, help=help_, description=help_)
    p.set_defaults(func=func)
    return p


def _add_ingest(sub: Any) -> None:
    help_ = "index documents (default: the corpus folder), incrementally"
    p = _add(sub, "ingest", cmd_ingest, help_)
    p.add_argument(
        "paths",
        nargs="*",
        help="files or folders of .pdf/.md/.txt documents, or .jsonl, or https:// and arXiv links "
        "to PDFs (a file over CHATBOT_MAX_FILE_MB, 20 by default, is skipped)",
    )
    p.add_argument(
        "--rebuild",
        action="store_true",
        help="drop the collection and index anew (it names any folder it would drop)",
    )
    p.add_argument(
        "--yes", action="store_true", help="with --rebuild: drop what the paths do not cover"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--replace",
        action="store_true",
        help="move an id that another file already holds to the document ingested now "
        "(without it, such a document is skipped and both files are named)",
    )
    p.add_argument("--id-field", default="id", help="JSON Lines: the record id field (id)")
    p.add_argument("--title-field", default="title", help="JSON Lines: title field, '' for none")
    p.add_argument("--text-field", default="text", help="JSON Lines: the text field (text)")


def _add_ask(sub: Any) -> None:
    p = _add(sub, "ask", cmd_ask, "answer one question")
    p.add_argument("question")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.add_argument("-k", type=int, default=None, help="passages to retrieve")
    p.add_argument("--where", action="append", metavar="KEY=VALUE", help=_WHERE_HELP)


def _add_retrieve(sub: Any) -> None:
    p = _add(sub, "retrieve", cmd_retrieve, "show the passages that best match a query (no answer)")
    p.add_argument("query")
    p.add_argument("--json", action="store_true", help="print the passages as JSON")
    p.add_argument("-k", type=int, default=None, help="passages to retrieve")
    p.add_argument("--where", action="append", metavar="KEY=VALUE", help=_WHERE_HELP)


def _add_eval(sub: Any) -> None:
    p = _add(sub, "eval", cmd_eval, "score answers to a question file (JSON Lines)")
    p.add_argument(
        "questions",
        help="a JSON Lines question file (one object a line: id, type, question or turns, gold)",
    )
    p.add_argument("--out", help="also write metrics and per-question results as JSON")
    p.add_argument("-k", type=int, default=None, help="passages each answer is given")
    p.add_argument("--where", action="append", metavar="KEY=VALUE", help=_WHERE_HELP)


def _add_serve(sub: Any) -> None:
    help_ = "serve the web UI (Gradio) and an OpenAI-compatible API at /v1"
    p = _add(sub, "serve", cmd_serve, help_)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=7860, help="port (default: 7860)")
    p.add_argument(
        "--auth",
        metavar="USER:PASSWORD",
        help="ask for this login on every route (CHATBOT_AUTH, which keeps it out of the process "
        "list)",
    )
    p.add_argument(
        "--trusted-proxy",
        metavar="ADDRESSES",
        help="the reverse proxy (IP addresses or networks such as 10.0.0.0/8, comma-separated; "
        "not '*') whose X-Forwarded-For names the client (CHATBOT_TRUSTED_PROXIES); without it "
        "the header is ignored",
    )
    p.add_argument(
        "--api-key",
        metavar="KEY",
        help="the bearer key API clients must send (CHATBOT_API_KEY, which keeps it out of the "
        "process list); required with a --host other than 127.0.0.1",
    )
    p.add_argument("--api-only", action="store_true", help="serve the API without the web UI")


def _port(text: str) -> int:
    """A TCP port number from the command line (argparse turns the ValueError into a message)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{port} is not a port number: pick one from 1 to 65535")
    return port


def _resume_hint(args: argparse.Namespace) -> str:
    """The exact command that finishes an interrupted ingest: its collection and its paths."""
    import shlex

    words = ["chatbot"]
    # The collection is named even when it came from the environment: the command stands alone.
    collection = args.collection or (_bots[-1].settings.collection if _bots else None)
    given = {"data_dir": args.data_dir, "collection": collection, "chroma_url": args.chroma_url}
    for flag, value in given.items():
        if value:
            words += [f"--{flag.replace('_', '-')}", str(value)]
    words.append("ingest")
    for flag, default in (("id_field", "id"), ("title_field", "title"), ("text_field", "text")):
        if getattr(args, flag, default) != default:
            words += [f"--{flag.replace('_', '-')}", getattr(args, flag)]
    # An interrupted rebuild is finished by a plain ingest: what it wrote is kept.
    words += [*(["--replace"] if args.replace else []), *args.paths]
    return f"run `{shlex.join(words)}` again to finish (nothing is half-indexed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run a sub-command; errors become one line on stderr and a non-zero exit."""
    parser = build_parser()
    args = parser.parse_args(argv)
    global _command
    _command = args.command
    try:
        return args.func(args)
    except ChatbotError as e:
        say(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        hint = _resume_hint(args) if args.command == "ingest" else "stopped"
        say(f"interrupted: {hint}.", file=sys.stderr)
        return 128 + signal.SIGTERM if isinstance(e, _Terminated) else 130
    except BrokenPipeError:
        # `chatbot ask … | head -1`: the reader has gone; that is not an error to report.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as e:
        if args.debug:
            raise
        say(f"error: unexpected {type(e).__name__}: {e} (--debug shows details)", file=sys.stderr)
        return 1


def run() -> Any:
    """Console-script wrapper."""
    code = main()
    if _command in READ_ONLY and not any(bot.index_changed for bot in _bots):
        # Tearing down chromadb, langchain and numpy takes most of a second and there is
        # nothing to save when nothing was written: leave at once.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
