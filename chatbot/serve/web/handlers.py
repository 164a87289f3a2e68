"""The web UI's event handlers: what each click, submit and tab switch does to the chat state.

One `Handlers` per app: it answers (streaming, stoppable), lists the corpus, exports the
conversation and records feedback; what it shows is built by `view.py`.
"""

from __future__ import annotations

import html
import logging
import re
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from queue import Empty, Queue
from typing import Any

import gradio as gr

from chatbot.errors import ChatbotError
from chatbot.serve.web.view import (
    NO_SOURCES,
    chat_messages,
    conversation_markdown,
    corpus_documents,
    corpus_table,
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
