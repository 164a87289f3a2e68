"""The Documents tab: add PDFs and text files from the browser, see what is indexed, delete.

Uploaded files are copied under the data directory (`uploads/`, names made safe) and ingested
like any file: the one shared bot then answers from them in every open tab at once. A refused
file is named with its reason and not kept.
"""

from __future__ import annotations

import html
import logging
import shutil
from pathlib import Path
from typing import Any

import gradio as gr

from .errors import ChatbotError
from .fetch import FOLDER as FETCHED
from .fetch import safe_name

log = logging.getLogger(__name__)
UPLOADS = "uploads"  # under the data directory
KINDS = (".pdf", ".md", ".txt", ".jsonl")
MAX_FILES = 10
PRIVATE = {"api_visibility": "private"}


def served_folders(bot) -> list[str]:
    """Folders whose PDFs the app serves (to logged-in users only, when a login is set)."""
    data = Path(bot.settings.data_dir).resolve()
    return [str(data / UPLOADS), str(data / FETCHED)]


def pdf_link(file: str | None, page: str | None) -> str | None:
    """The app's link to a served PDF, opening at `page` ("4" or "4-5")."""
    if not file or not file.lower().endswith(".pdf"):
        return None
    first = (page or "1").partition("-")[0]
    return f"gradio_api/file={html.escape(file, quote=True)}#page={first}"


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
        self.folder = Path(bot.settings.data_dir) / UPLOADS

    def add(self, files: list[Any] | None, progress=gr.Progress()) -> tuple[str, Any]:  # noqa: B008
        """Copy the picked files under the data directory, index them, and say what happened."""
        files = [Path(getattr(f, "name", f)) for f in files or []]
        if not files:
            return "", gr.skip()
        if len(files) > MAX_FILES:
            return _note([f"{len(files)} files picked: add at most {MAX_FILES} at once."]), None
        self.folder.mkdir(parents=True, exist_ok=True)
        notes: list[str] = []
        kept: list[Path] = []
        for i, file in enumerate(files):
            progress((i, len(files)), desc=f"Reading {file.name}")
            name = safe_name(file.name)
            if Path(name).suffix.lower() not in KINDS:
                notes.append(f"{file.name}: is not a PDF, .md, .txt or .jsonl file")
                continue
            target = self.folder / name
            shutil.copyfile(file, target)
            kept.append(target)
        if kept:
            progress(0.9, desc="Indexing")
            try:
                report = self.bot.ingest(kept, progress=False)
            except ChatbotError as e:
                return _note([str(e)]), None
            refused = {Path(p.source.partition("#")[0]).name for p in report.problems}
            for problem in report.problems:
                notes.append(f"{Path(problem.source).name}: {problem.message}")
            for target in kept:
                if target.name in refused:
                    target.unlink(missing_ok=True)  # a refused file is not kept
            added = [t.name for t in kept if t.name not in refused]
            if added:
                notes.insert(0, f"Added: {', '.join(added)} ({report.passages} passages).")
        return _note(notes), None

    def delete(self, doc_id: str | None) -> str:
        """Remove an uploaded document: its file and its passages."""
        docs = {d.doc_id: d for d in self.bot.documents()}
        doc = docs.get(doc_id or "")
        if doc is None:
            return _note(["Pick an uploaded document to delete."])
        file = Path(doc.source)
        if file.parent.resolve() != self.folder.resolve():
            return _note([f"{doc.title}: only uploaded documents can be deleted here."])
        file.unlink(missing_ok=True)
        try:
            self.bot.ingest([self.folder], progress=False)
        except ChatbotError as e:
            return _note([str(e)])
        return _note([f"Deleted: {doc.title}."])

    def listing(self) -> tuple[str, Any]:
        """The indexed documents with their pages, and the uploaded ones to choose for delete."""
        try:
            docs = self.bot.documents()
        except ChatbotError as e:
            return _note([str(e)]), gr.skip()
        rows, uploaded = [], []
        for d in sorted(docs, key=lambda d: d.title.lower()):
            pages = d.metadata.get("pages")
            mine = Path(d.source).parent.resolve() == self.folder.resolve()
            if mine:
                uploaded.append((d.title, d.doc_id))
            link = pdf_link(d.source if mine or pages else None, "1")
            title = html.escape(d.title)
            if link:
                title = f"<a href='{link}' target='_blank' rel='noopener'>{title}</a>"
            rows.append(
                f"<tr><td>{title}</td><td>{pages or ''}</td>"
                f"<td>{'uploaded' if mine else html.escape(Path(d.source).name)}</td>"
                f"<td><code>{html.escape(d.doc_id)}</code></td></tr>"
            )
        table = (
            f"<p>{len(docs)} documents indexed.</p><div class='table-scroll'>"
            "<table id='documents-list'><tr><th>Title</th><th>Pages</th><th>From</th>"
            "<th>Id</th></tr>" + "".join(rows) + "</table></div>"
        )
        return table, gr.Dropdown(choices=uploaded, value=None)


def _note(lines: list[str]) -> str:
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f"<ul id='upload-notes'>{items}</ul>" if items else ""


def documents_section(bot, tab: gr.Tab) -> None:
    """The upload box, the list of documents and the delete action, wired to `tab`."""
    docs = Documents(bot)
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
    listing = gr.HTML(elem_id="documents-table")
    files.upload(docs.add, files, [notes, files], **PRIVATE).then(
        docs.listing, None, [listing, pick], **PRIVATE
    )
    delete.click(docs.delete, pick, notes, **PRIVATE).then(
        docs.listing, None, [listing, pick], **PRIVATE
    )
    tab.select(docs.listing, None, [listing, pick], **PRIVATE)
