"""The Documents tab: add PDFs and text files from the browser, see what is indexed, delete.

Uploaded files are copied under the data directory (`uploads/`, names made safe) and ingested
like any file: the one shared bot then answers from them in every open tab at once. A refused
file is named with its reason and not kept.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import gradio as gr

from chatbot.errors import ChatbotError

log = logging.getLogger(__name__)
KINDS = (".pdf", ".md", ".txt", ".jsonl")
MAX_FILES = 10
PRIVATE = {"api_visibility": "private"}


def launch_options(bot) -> dict[str, Any]:
    """What `launch` needs for uploads: the PDFs it may serve (to logged-in users only, when a
    login is set) and the largest upload it takes."""
    try:
        paths = [str(p) for p in bot.pdf_files()]
    except ChatbotError as e:
        log.warning("PDFs are not served: %s", e)
        paths = []
    # An upload over the limit is stopped by Gradio before it lands.
    return {"allowed_paths": paths, "max_file_size": bot.settings.max_file_bytes}


def pdf_link(file: str | None, page: str | None) -> str | None:
    """The app's link to a served PDF, opening at `page` ("4" or "4-5")."""
    if not file or not file.lower().endswith(".pdf"):
        return None
    first = (page or "1").partition("-")[0]
    # Quoted: a path may hold spaces or a '#'; escaped again by whoever puts it in HTML.
    return f"gradio_api/file={quote(file)}#page={quote(first)}"


def limits(bot) -> str:
    """The limits of an upload, stated before a user picks files."""
    s = bot.settings
    return (
        f"Add up to {MAX_FILES} files at once: PDF (with a text layer, up to "
        f"{s.max_pdf_pages} pages), Markdown, text or JSON Lines, each up to "
        f"{s.max_file_mb:g} MB. Scanned PDFs cannot be read (no OCR)."
    )


class Documents:
    """The tab's handlers, over the bot the whole app shares."""

    def __init__(self, bot) -> None:
        self.bot = bot

    def add(
        self,
        files: list[Any] | None,
        progress=gr.Progress(track_tqdm=True),  # noqa: B008  (ingest's bar shows in the page)
    ) -> tuple[str, Any]:
        """Keep the picked files under the data directory, index them, say what happened."""
        files = [Path(getattr(f, "name", f)) for f in files or []]
        if not files:
            return "", gr.skip()
        if len(files) > MAX_FILES:
            return _note([f"{len(files)} files picked: add at most {MAX_FILES} at once."]), None
        notes = [f"{f.name}: is not a PDF, .md, .txt or .jsonl file" for f in files if not _ok(f)]
        files = [f for f in files if _ok(f)]
        if not files:
            return _note(notes), None
        progress(0, desc="Reading")
        try:
            report, kept = self.bot.add_files(files)
        except ChatbotError as e:
            return _note([str(e)]), None
        notes += [f"{Path(p.source).name}: {p.message}" for p in report.problems]
        if kept:
            # The same counts as `chatbot ingest` prints.
            notes.insert(0, f"Indexed: {', '.join(k.name for k in kept)}: {report}.")
        return _note(notes), None

    def delete(self, doc_id: str | None) -> str:
        """Remove an uploaded document: its file and its passages."""
        try:
            deleted = bool(doc_id) and self.bot.delete_upload(doc_id)
        except ChatbotError as e:
            return _note([str(e)])
        if not deleted:
            return _note(["Pick an uploaded document to delete."])
        return _note([f"Deleted: {doc_id}."])

    def uploaded(self) -> Any:
        """The uploaded documents, to choose one to delete."""
        try:
            docs = self.bot.documents()
        except ChatbotError:
            return gr.skip()  # the table beside it says why the index cannot be read
        folder = self.bot.uploads_dir.resolve()
        mine = [
            (d.title, d.doc_id)
            for d in sorted(docs, key=lambda d: d.title.lower())
            if Path(d.source).parent == folder
        ]
        return gr.Dropdown(choices=mine, value=None)


def _ok(file: Path) -> bool:
    return file.suffix.lower() in KINDS


def _note(lines: list[str]) -> str:
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f"<ul id='upload-notes'>{items}</ul>" if items else ""


@dataclass(frozen=True)
class Upload:
    """The tab's components, wired once the tab's table of documents exists."""

    handlers: Documents
    files: gr.File
    notes: gr.HTML
    pick: gr.Dropdown
    delete: gr.Button

    def wire(self, tab: gr.Tab, refresh: list[tuple[Callable[..., Any], Any]]) -> None:
        """After an upload or a delete, run each (function, outputs) of `refresh` in turn; list
        the uploaded documents then and when the tab opens."""
        docs = self.handlers
        for event in (
            self.files.upload(docs.add, self.files, [self.notes, self.files], **PRIVATE),
            self.delete.click(docs.delete, self.pick, self.notes, **PRIVATE),
        ):
            for fn, outputs in refresh:
                event = event.then(fn, None, outputs, **PRIVATE)
            event.then(docs.uploaded, None, self.pick, **PRIVATE)
        tab.select(docs.uploaded, None, self.pick, **PRIVATE)


def documents_section(bot) -> Upload:
    """The stated limits, the upload box, its notes, and the delete action."""
    gr.Markdown(limits(bot), elem_id="upload-limits")
    files = gr.File(
        label="Add documents",
        file_count="multiple",
        file_types=list(KINDS),
        elem_id="upload",
    )
    notes = gr.HTML(elem_id="upload-result")
    with gr.Row():
        pick = gr.Dropdown(label="Uploaded document", choices=[], elem_id="delete-pick")
        delete = gr.Button("Delete", variant="stop", elem_id="delete-doc", scale=0)
    return Upload(Documents(bot), files, notes, pick, delete)
