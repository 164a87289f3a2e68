"""The web UI: a Gradio chat that streams cited answers beside the passages they cite."""

from __future__ import annotations

import os

# Gradio reads this when it is imported; analytics would look up outside hosts.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"

import html
import logging
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from queue import Empty, Queue
from typing import Any

import gradio as gr
from starlette.middleware import Middleware

from . import api
from .errors import ChatbotError, ConfigError, EmptyIndexError
from .webassets import CSS, JS, SAVE_JS, submit_js
from .webdocs import documents_section, launch_options
from .webguard import LOGIN_ATTEMPTS, LOGIN_COOLDOWN, Gate, Guard
from .webview import (
    NO_SOURCES,
    chat_messages,
    conversation_markdown,
    corpus_documents,
    corpus_table,
    counter_html,
    document_markdown,
    download_name,
    friendly,
    history_of,
    passage_dicts,
    save_feedback,
    sources_html,
    vote_of,
)

log = logging.getLogger(__name__)

EXAMPLES = [
    "Do AI agent benchmarks reflect reality?",
    "How do transformers act as associative memories?",
    "Are deep ensembles better than one large model?",
    "Can small language models solve olympiad math problems?",
    "How can collectives influence AI platforms?",
]
# Gradio's login form shows nothing when a login is refused for being one too many: say it here.
LOGIN_NOTE = (
    f"After {LOGIN_ATTEMPTS} wrong passwords, each further wrong one is refused for a while "
    f"({LOGIN_COOLDOWN:.0f} s at first, twice as long after each); the right one always gets in."
)
KEY_NOTE = f"Log in with this server's API key as the password (any user name). {LOGIN_NOTE}"
# The browser calls the event handlers; only the `chat` endpoint is part of the HTTP API.
PRIVATE = {"api_visibility": "private"}
# How often an answer waiting for the model's next piece looks whether Stop was pressed (s).
STOP_POLL = 0.1
_DONE = object()  # the model's stream has ended
# An address in the model line is named, not linked: it is the model server's, not a page.
_URL = re.compile(r"https?://\S+")
_UNEXPECTED = (
    "Something went wrong on the server while answering. Try again; if it keeps happening, "
    "the server log says why."
)


class _Run(threading.Event):
    """Set to stop the answer a page is waiting for; `cleared` once its chat was cleared too."""

    cleared = False


class Handlers:
    """The UI's event handlers for one bot: each reads the components' values, returns theirs."""

    def __init__(self, bot) -> None:
        self.bot = bot
        self.model = bot.settings.model_label
        self.model_md = _URL.sub(lambda m: f"`{m[0]}`", self.model)
        # The pages (Gradio sessions) whose answer is being written, each with its Stop signal.
        self._running: dict[str | None, _Run] = {}
        self._lock = threading.Lock()

    def indicator(self) -> str:
        """The line naming the model and what the index holds."""
        try:
            info = self.bot.info()
        except ChatbotError as e:
            return f"**Model:** {self.model_md} · **Index:** unavailable ({e})"
        except Exception:
            log.exception("reading the index failed")
            return f"**Model:** {self.model_md} · **Index:** unavailable (see the server log)"
        if not info["documents"]:
            # Every question would fail: say how to fill the index before anyone asks.
            model = self.model_md
            return f"**Model:** {model} · **Index:** empty, fill it with `chatbot ingest PATH`"
        return (
            f"**Model:** {self.model_md} · **Index:** {info['documents']} documents, "
            f"{info['passages']} passages · embeddings: {info['embedding_model']}"
        )

    def export(self, turns: list[dict[str, Any]] | None) -> dict[str, str] | Any:
        """The conversation as a file for the browser to save: its name and Markdown text.

        The page turns it into the download itself, so the server writes no file at all.
        """
        if not turns:
            return gr.skip()
        return {
            "name": download_name(turns[0]["question"], datetime.now(UTC).date()),
            "text": conversation_markdown(turns, self.model),
        }

    def _claim(self, request: gr.Request | None) -> bool:
        """Mark the page's session as answering; False when an answer is already running."""
        key = request.session_hash if request else None
        with self._lock:
            if key in self._running:
                return False
            self._running[key] = _Run()
            return True

    def example(self, index: int, request: gr.Request):
        """The example question, into the box; nothing while this page's answer is written."""
        with self._lock:
            running = (request.session_hash if request else None) in self._running
        return gr.skip() if running else EXAMPLES[index]

    def take(self, asked: str | None, request: gr.Request):
        """Take the question the page sent to be answered: the question, the buttons, the box.

        The page has already moved it from the box into the chat (`submit_js`), so what is typed
        next is never cleared by a late reply. Should an answer for this page already be running,
        the question goes back into the box rather than being lost.
        """
        question = (asked or "").strip()
        if not question:
            return None, gr.skip(), gr.skip(), gr.skip()
        if not self._claim(request):
            return None, gr.skip(), gr.skip(), question
        return question, *_busy(True), gr.skip()

    def retry(self, turns: list[dict[str, Any]] | None, request: gr.Request):
        """Ask the last question again: the turns without its answer, the question, the buttons."""
        turns = list(turns or [])
        if not turns or not self._claim(request):
            return gr.skip(), None, gr.skip(), gr.skip()
        return turns[:-1], turns[-1]["question"], *_busy(True)

    def stop(self, request: gr.Request) -> None:
        """Stop the answer being written for this page; what it wrote so far stays, marked."""
        with self._lock:
            running = self._running.get(request.session_hash if request else None)
        if running is not None:
            running.set()

    def respond(
        self, question: str | None, turns: list[dict[str, Any]] | None, request: gr.Request
    ):
        """Stream the answer to `question` into the chat, then show its sources.

        Yields values for the chat, the sources, the turns, the download and the two buttons.
        """
        if not question:
            yield (gr.skip(),) * 6
            return
        key = request.session_hash if request else None
        with self._lock:
            stop = self._running.get(key) or _Run()
        try:
            yield from self._respond(question, list(turns or []), stop)
        finally:
            with self._lock:
                self._running.pop(key, None)

    def _respond(self, question: str, turns: list[dict[str, Any]], stop: _Run):
        history = history_of(turns)
        # A conversation is named by its first answer's id; after "clear" the next one starts anew.
        message_id = uuid.uuid4().hex
        turn: dict[str, Any] = {
            "id": message_id,
            "conversation": turns[-1]["conversation"] if turns else message_id,
            "question": question,
            "answer": "",
            "citations": [],
            "model": self.model,
            "pending": True,
        }
        turns.append(turn)
        skip = gr.skip()
        yield chat_messages(turns, ""), sources_html(turns), turns, skip, skip, skip
        for text, sources_changed in self._answer(turn, history, stop):
            sources = sources_html(turns) if sources_changed else skip
            yield chat_messages(turns, text), sources, skip, skip, skip, skip
        # A stopped answer keeps the passages it was reading; a finished one has its citations,
        # and one citing none keeps what it was given, which the sources panel shows instead.
        done = ("pending",) if turn.get("stopped") else ("pending", "numbers")
        if turn["citations"] or turn.get("abstained"):
            done += ("retrieved",)
        for key in done:
            turn.pop(key, None)
        if stop.cleared:
            yield [], NO_SOURCES, [], gr.Button(interactive=False), *_busy(False)
            return
        download = gr.Button(interactive=True)
        yield chat_messages(turns), sources_html(turns), turns, download, *_busy(False)

    def _answer(
        self, turn: dict[str, Any], history: list[dict[str, str]], stop: threading.Event
    ) -> Iterator[tuple[str, bool]]:
        """The answer's text so far and whether its sources changed, piece by piece.

        The retrieved passages come first, before the model's first token; then `turn` holds
        the answer, the error, or what was written before Stop.
        """
        text = ""
        try:
            stream = self.bot.stream(turn["question"], history)
            turn.update(retrieved=passage_dicts(stream.passages), numbers={})
            yield text, True
            for piece, numbers in _pieces(stream, stop):
                text += piece
                changed, turn["numbers"] = numbers != turn["numbers"], numbers
                yield text, changed
            if stream.answer is not None:
                self._finish(turn, stream.answer)
            else:  # Stop was pressed
                turn.update(stopped=True, partial=text.strip())
        except ChatbotError as e:
            turn["error"] = friendly(e)
        except Exception:
            log.exception("answering %r failed", turn["question"])
            turn["error"] = _UNEXPECTED
        if turn.get("error") and text.strip():
            # What arrived stays on screen, marked as cut off; it is never taken as an answer.
            turn["partial"] = text.strip()
        turn["time"] = datetime.now(UTC).isoformat(timespec="seconds")

    @staticmethod
    def _finish(turn: dict[str, Any], answer) -> None:
        """Keep the complete answer in its turn."""
        turn.update(
            answer=answer.text,
            abstained=answer.abstained,
            # The PDF behind a source, for its page link (kept out of the JSON shape and API).
            citations=[{**c.to_dict(), "file": c.metadata.get("file")} for c in answer.citations],
            unsupported=[u.to_dict() for u in getattr(answer, "unsupported", ())],
            narrowed=list(getattr(answer, "narrowed", ())),
        )

    def clear(self, request: gr.Request):
        """An empty chat, no turns, no sources, nothing to download; a running answer stops."""
        with self._lock:
            running = self._running.get(request.session_hash if request else None)
        if running is not None:
            running.cleared = True  # its last update empties the chat instead of showing it
            running.set()
        return [], [], NO_SOURCES, gr.Button(interactive=False)

    def on_like(self, turns: list[dict[str, Any]] | None, data: gr.LikeData) -> None:
        """Save the vote now standing on an answer (message i belongs to turn i // 2).

        No confirmation pops up: the filled thumb says it, and toasts would pile up over the
        sources. Replies that are not answers show no buttons, and a vote on one is not saved.
        """
        index = data.index[0] if isinstance(data.index, (list, tuple)) else data.index
        turns = turns or []
        turn = turns[index // 2] if 0 <= index // 2 < len(turns) else None
        if turn is None or any(turn.get(k) for k in ("error", "stopped", "pending")):
            return
        try:
            save_feedback(self.bot.settings.data_dir, turn, vote_of(data.liked))
        except OSError as e:
            raise gr.Error(f"Could not save your feedback ({e.strerror or e}).") from e

    def load_corpus(self):
        """The table of indexed documents, the reader's choices, and the documents themselves."""
        try:
            docs = corpus_documents(self.bot)
        except Exception as e:
            if not isinstance(e, ChatbotError):
                log.exception("listing the corpus failed")
            reason = str(e) if isinstance(e, ChatbotError) else "see the server log"
            return f"<p>The index cannot be read: {html.escape(reason)}</p>", gr.skip(), []
        choices = [(d["title"], d["doc_id"]) for d in docs]
        return corpus_table(docs), gr.Dropdown(choices=choices, value=None), docs

    @staticmethod
    def show_document(doc_id: str | None, docs: list[dict[str, Any]] | None) -> str:
        """The chosen document, readable."""
        for doc in docs or []:
            if doc["doc_id"] == doc_id:
                return document_markdown(doc)
        return ""

    def chat(self, message: str) -> dict[str, Any]:
        """Answer one question about the ICML 2025 papers, with the sources its [n] cite.

        The same JSON as `chatbot ask --json`: answer, abstained, citations (n, doc_id, title,
        text, score, paper, url, authors, year, venue, quote, spans), unsupported, narrowed.
        """
        try:
            return self.bot.ask(message).to_dict()
        except ChatbotError as e:
            raise gr.Error(friendly(e)) from e
        except Exception as e:
            log.exception("answering %r failed", message)
            raise gr.Error(_UNEXPECTED) from e


@dataclass(frozen=True)
class ChatTab:
    """The components of the chat tab that events read or write."""

    chat: gr.Chatbot
    box: gr.Textbox
    send: gr.Button
    stop: gr.Button
    count: gr.HTML
    download: gr.Button
    file: gr.JSON
    examples: gr.Dataset
    sources: gr.HTML


def build_app(bot) -> gr.Blocks:
    """The Gradio app for `bot`: chat with streaming cited answers, sources, corpus, feedback."""
    ui = Handlers(bot)
    with gr.Blocks(title="ICML 2025 papers chatbot", analytics_enabled=False) as app:
        gr.Markdown("# Ask the ICML 2025 papers")
        status = gr.Markdown(f"**Model:** {ui.model_md}", elem_id="model-indicator")
        turns = gr.State([])
        docs = gr.State([])
        with gr.Tabs():
            with gr.Tab("Chat", id="chat-tab"):
                tab = _chat_tab(bot.settings.max_question_chars)
            with gr.Tab("Documents", id="corpus-tab") as corpus_tab:
                upload = documents_section(bot)  # add files, delete uploaded ones
                pick = gr.Dropdown(label="Read a document", choices=[], elem_id="corpus-pick")
                reader = gr.Markdown(elem_id="corpus-doc")
                table = gr.HTML(elem_id="corpus-table")
        _wire_chat(ui, tab, turns, bot.settings.max_question_chars)
        app.load(ui.indicator, None, status, **PRIVATE)
        corpus_tab.select(ui.load_corpus, None, [table, pick, docs], **PRIVATE)
        upload.wire(corpus_tab, [(ui.load_corpus, [table, pick, docs]), (ui.indicator, status)])
        pick.change(ui.show_document, [pick, docs], reader, **PRIVATE)
        gr.api(ui.chat, api_name="chat")
    return app


def _chat_tab(limit: int) -> ChatTab:
    """The chat beside the sources of its latest answer, with the buttons and examples."""
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            chat = gr.Chatbot(
                elem_id="chat",
                label="Conversation",
                height=520,
                feedback_options=("Like", "Dislike"),
                placeholder="Ask a question about the ICML 2025 paper summaries.",
                buttons=["copy"],
                # The page follows a new question itself (webassets.JS: followChat).
                autoscroll=False,
            )
            with gr.Row():
                # No max_length: a pasted question over the limit is kept whole for the user to
                # shorten, and the counter says by how much; the box grows to a few lines only,
                # so the counter below it stays on screen.
                box = gr.Textbox(
                    elem_id="question",
                    placeholder="Ask a question and press Enter",
                    show_label=False,
                    scale=5,
                    autofocus=True,
                    max_lines=4,
                )
                send = gr.Button("Send", variant="primary", scale=1, elem_id="send")
                # Takes Send's place while an answer is written, so the box keeps its width.
                stop = gr.Button("Stop", variant="stop", scale=1, visible=False, elem_id="stop")
            count = gr.HTML(counter_html(0, limit), elem_id="question-count")
            # The chat's own trash icon is the one way to clear it (and start a new conversation).
            download = gr.Button(
                "Download conversation (.md)", elem_id="download", size="sm", interactive=False
            )
            file = gr.JSON(visible=False)
            examples = gr.Dataset(
                label="Example questions",
                components=[box],
                samples=[[q] for q in EXAMPLES],
                type="index",
                elem_id="examples",
            )
        with gr.Column(scale=2, elem_id="sources-col"):
            gr.Markdown("### Sources")
            sources = gr.HTML(NO_SOURCES, elem_id="sources")
    return ChatTab(chat, box, send, stop, count, download, file, examples, sources)


def _wire_chat(ui: Handlers, tab: ChatTab, turns: gr.State, limit: int) -> None:
    """Connect the chat tab's events to their handlers."""
    # The page itself moves the question from the box into the chat (`submit_js`): it shows at
    # once, and what is typed next is never cleared by a reply arriving late. `asked` (a field
    # the page can write, unlike a State) carries it to the server ("": nothing asked). The quick
    # steps are queued too, each in its own group: unqueued ones carry no session id.
    asked = gr.Textbox(visible=False)
    sent = [tab.box, asked, tab.chat, tab.count]
    page_submit = {"fn": None, "inputs": [tab.box, tab.chat], "outputs": sent, **PRIVATE}
    page_submit["js"] = submit_js(limit)
    taken = [asked, tab.send, tab.stop, tab.box]
    outputs = [tab.chat, tab.sources, turns, tab.download, tab.send, tab.stop]
    now = {**PRIVATE, "show_progress": "hidden"}
    tab.box.submit(**page_submit).then(ui.take, asked, taken, **now).then(
        ui.respond, [asked, turns], outputs, **PRIVATE
    )
    tab.send.click(**page_submit).then(ui.take, asked, taken, **now).then(
        ui.respond, [asked, turns], outputs, **PRIVATE
    )
    tab.examples.click(ui.example, tab.examples, tab.box, **now).then(**page_submit).then(
        ui.take, asked, taken, **now
    ).then(ui.respond, [asked, turns], outputs, **PRIVATE)
    tab.chat.retry(ui.retry, turns, [turns, asked, tab.send, tab.stop], **now).then(
        ui.respond, [asked, turns], outputs, **PRIVATE
    )
    tab.stop.click(ui.stop, None, None, **now)
    # The counter runs in the browser: no request per keystroke.
    count_js = f"(text) => window.questionCounter(text, {limit}, false)"
    tab.box.change(None, tab.box, tab.count, js=count_js, **PRIVATE)
    cleared = [tab.chat, turns, tab.sources, tab.download]
    tab.chat.clear(ui.clear, None, cleared, **PRIVATE)
    tab.chat.like(ui.on_like, turns, None, **PRIVATE)
    # The file is made when asked for, and the page saves it: nothing is written on the server.
    tab.download.click(ui.export, turns, tab.file, **PRIVATE).then(
        None, tab.file, None, js=SAVE_JS, **PRIVATE
    )


def _pieces(stream, stop: threading.Event) -> Iterator[tuple[str, dict[int, int]]]:
    """The stream's pieces, each with the citation numbers so far, until it ends or Stop.

    A thread reads the model so that Stop ends the answer at once, even while the model is
    silent; that thread closes the stream (a model server's HTTP response) as soon as the model
    sends its next piece.
    """
    pieces: Queue = Queue()

    def read() -> None:
        try:
            for piece in stream:
                if stop.is_set():
                    break
                pieces.put((piece, dict(stream.numbers)))
        except BaseException as e:  # raised again in the answering thread
            pieces.put(e)
        finally:
            if stop.is_set():
                stream.close()
            pieces.put(_DONE)

    threading.Thread(target=read, name="answer-reader", daemon=True).start()
    while not stop.is_set():
        try:
            item = pieces.get(timeout=STOP_POLL)
        except Empty:
            continue
        if item is _DONE:
            return
        if isinstance(item, BaseException):
            raise item
        if not stop.is_set():
            yield item


def _busy(running: bool) -> tuple[gr.Button, gr.Button]:
    """The Send and Stop buttons while an answer is written (running) and after: one shows."""
    return gr.Button(visible=not running, interactive=not running), gr.Button(visible=running)


def parse_auth(auth: str | tuple[str, str] | None) -> tuple[str, str] | None:
    """`"user:password"` as a pair; raises ConfigError when it has another shape."""
    if auth is None or isinstance(auth, tuple):
        return auth
    user, sep, password = auth.partition(":")
    if not sep or not user or not password:
        raise ConfigError(
            "--auth (or CHATBOT_AUTH) must look like user:password (both parts non-empty)."
        )
    return user, password


def _theme() -> gr.themes.Default:
    """The default theme with the system's fonts: nothing is loaded from other hosts."""
    return gr.themes.Default(
        font=["ui-sans-serif", "system-ui", "sans-serif"],
        font_mono=["ui-monospace", "Consolas", "monospace"],
    )


def _gate(settings, host: str, auth: str | tuple[str, str] | None) -> Gate:
    """Who may use the server: the login (`auth`, else CHATBOT_AUTH) and the API key.

    Off this machine a key is required (a ConfigError otherwise); every route then asks for the
    login or the key.
    """
    login = settings.login.get_secret_value() if settings.login else None
    api.check_exposure(host, settings.api_key)
    _trust_forwarded(settings.trusted_proxies)
    return Gate(parse_auth(auth if auth is not None else login), settings.api_key)


def _login_form(gate: Gate) -> dict[str, Any]:
    """Gradio's login form for `gate`: none when nothing is asked for.

    Without a login, the key is the form's password, so the page stays usable in a browser.
    """
    if not gate.closed:
        return {"auth": None, "auth_message": None}
    if gate.login is not None:
        return {"auth": gate.login, "auth_message": LOGIN_NOTE}
    return {"auth": gate.right_login, "auth_message": KEY_NOTE}


def _trust_forwarded(proxies: str | None) -> None:
    """Have the server take X-Forwarded-For as the client's address only from `proxies`.

    uvicorn trusts it from the addresses in FORWARDED_ALLOW_IPS, 127.0.0.1 when unset: any local
    client could then pick the address its wrong logins count against. Gradio builds uvicorn's
    settings inside launch(), so the variable is how to reach them.
    """
    os.environ["FORWARDED_ALLOW_IPS"] = proxies or ""


def serve(
    bot,
    host: str = "127.0.0.1",
    port: int = 7860,
    auth: str | tuple[str, str] | None = None,
    *,
    block: bool = True,
) -> gr.Blocks:
    """Serve the web UI and the OpenAI-compatible API (/v1) on host:port until Ctrl-C.

    Local only by default; block=False returns at once.
    """
    gate = _gate(bot.settings, host, auth)
    try:
        bot.ensure_index()
    except EmptyIndexError as e:
        # The page still opens: the index line and every question say how to fill it.
        log.warning("%s", e)
    app = build_app(bot)
    # The UI's queue and the API answer as many questions at once.
    limit = api.concurrency(bot)
    app.queue(default_concurrency_limit=limit, max_size=None)
    # With a login on the UI, an API without a key is locked: it would answer past the login.
    v1 = api.routes(bot, gate.key, limit, locked=gate.login is not None, throttle=gate.throttle)
    try:
        app.launch(
            server_name=host,
            server_port=port,
            **_login_form(gate),
            prevent_thread_lock=True,
            share=False,
            show_error=False,
            quiet=True,
            theme=_theme(),
            css=CSS,
            js=JS,
            footer_links=["api"],
            run_history=False,
            **launch_options(bot),  # PDFs served for the page links, the upload size limit
            # Every route asks for the login or the key, wrong ones are throttled, and every
            # response carries the CSP (webguard.py).
            app_kwargs={"middleware": [Middleware(Guard, gate=gate)], "routes": v1},
        )
    except OSError as e:
        # Gradio's own message talks about launch() parameters; say it in CLI terms.
        raise ConfigError(
            f"Cannot serve on {host}:{port}: the port is in use or the address is not "
            "available here. Pick another with --port (or --host)."
        ) from e
    if block:
        url = app.local_url
        print(f"Chat served at {url}, the OpenAI-compatible API at {url}v1.", flush=True)
        print("Ctrl-C stops it.", flush=True)
        app.block_thread()  # until Ctrl-C
        app.close()
    return app
