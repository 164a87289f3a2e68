"""What the web UI shows, as plain functions of the chat state: no Gradio here, easy to test."""

from __future__ import annotations

import html
import json
import re
import threading
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from chatbot.errors import ChatbotError, ModelError
from chatbot.serve.web.cite import flag_html, linkify, marker_evidence, put_flags, why, with_flags
from chatbot.serve.web.documents import pdf_link
from chatbot.values import Citation

FEEDBACK_FILE = "feedback.jsonl"
NO_SOURCES = "<p class='hint'>The sources of the latest answer appear here.</p>"
# Marks a reply that is not an answer (an error, a cut-off answer): the page hides its feedback
# buttons, as Gradio's Chatbot shows them on every reply, and a vote on it is never saved.
NO_FEEDBACK = "<span class='no-feedback'></span>"
# Marks the answer being written: the page hides its copy and vote buttons until it is complete.
WRITING = "<span class='writing'></span>"
# A `!` opening an image (`![alt](url)`, `![alt][ref]`), with the backslashes before it: an odd
# number already escapes it. A `<` opening an HTML tag, comment or declaration.
_IMAGE = re.compile(r"(\\*)!(?=\[)")
_TAG = re.compile(r"<(?=[A-Za-z/!?])")
_FEEDBACK_LOCK = threading.Lock()
# How long a passage is shown whole, and how much of a longer passage is shown around its quote
# (characters).
SHORT_PASSAGE = 400
EXCERPT_CONTEXT = 120
# A download's name keeps this much of its first question; the sources panel's header this much
# of the question it answers; the ⚠ legend this much of each flagged sentence.
DOWNLOAD_NAME_CHARS = 60
HEADER_QUESTION_CHARS = 120
LEGEND_SENTENCE_CHARS = 140


def friendly(e: ChatbotError) -> str:
    """The error's message, kept short, with what to do when the model failed."""
    text = str(e).strip()
    if len(text) > 400:
        text = text[:400].rstrip() + "…"
    if text and text[-1] not in ".!?…":
        text += "."
    if isinstance(e, ModelError):
        text += " Try again in a moment; if it keeps failing, check the model with `chatbot info`."
    return text


def inert(text: str) -> str:
    """Markdown `text` that loads nothing when shown: images become links, HTML tags plain text.

    Documents and answers are not trusted: `![](http://host/?q=secret)` in either would make the
    browser send the secret to that host, and an `<img>`, `<video>` or `<iframe>` would too.
    """
    text = _IMAGE.sub(lambda m: m[0] if len(m[1]) % 2 else f"{m[1]}\\!", text)
    return _TAG.sub("&lt;", text)


def marked(text: str, spans: list[list[int]] | list[tuple[int, int]]) -> str:
    """`text` escaped, each `(start, end)` span in `<mark>`: the pieces escaped, not the marks.

    Each mark names its span's index (`data-span`), so that `[n]` can light up its own.
    """
    out, at = [], 0
    for i, (start, end) in sorted(enumerate(spans), key=lambda x: tuple(x[1])):
        start, end = max(start, at), min(end, len(text))
        if start >= end:
            continue
        mark = f"<mark data-span='{i}'>{html.escape(text[start:end])}</mark>"
        out += [html.escape(text[at:start]), mark]
        at = end
    out.append(html.escape(text[at:]))
    return "".join(out)


def _passage(c: dict[str, Any]) -> str:
    """The passage with its quote marked; a long one shows the quote in context, the rest folded."""
    text, spans = c["text"], [tuple(s) for s in c.get("spans") or ()]
    whole = f"<blockquote class='passage'>{marked(text, spans)}</blockquote>"
    if len(text) <= SHORT_PASSAGE:
        return whole
    first, last = (spans[0][0], spans[-1][1]) if spans else (0, 0)
    start = max(0, first - EXCERPT_CONTEXT)
    end = min(len(text), max(last + EXCERPT_CONTEXT, start + SHORT_PASSAGE // 2))
    if start > 0:  # begin and end on a word boundary
        start = text.find(" ", start) + 1 or start
    if end < len(text):
        end = text.rfind(" ", start, end) if " " in text[start:end] else end
    # Every span keeps its place in the list (an empty one outside the excerpt): marks name it.
    inside = [(max(a, start) - start, max(min(b, end) - start, 0)) for a, b in spans]
    excerpt = ("…" if start else "") + marked(text[start:end], inside)
    excerpt += "…" if end < len(text) else ""
    return (
        f"<blockquote class='passage excerpt'>{excerpt}</blockquote>"
        f"<details><summary>Read the whole passage</summary>{whole}</details>"
    )


# What a URL keeps as it is in a Markdown autolink; the rest ("<", ">", quotes, spaces) is encoded.
_URL_SAFE = ":/?#[]@!$&'()*+,;=%~"


def _safe_url(url: Any) -> str | None:
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None


def _link(url: str, label_html: str) -> str:
    return f"<a href='{html.escape(url)}' target='_blank' rel='noopener'>{label_html}</a>"


def sources_html(turns: list[dict[str, Any]]) -> str:
    """The sources panel: a section per answer, the latest shown, the others one click away.

    Each answer keeps its own cards (`src-<answer>-<n>`), so `[n]` in an older answer still
    leads to that answer's source n once a newer answer has arrived.
    """
    if not turns:
        return NO_SOURCES
    latest = len(turns)
    pick = ""
    if latest > 1:
        links = " ".join(
            f"<a href='#answer-{i}' title='{html.escape(t['question'], quote=True)}'>{i}</a>"
            for i, t in enumerate(turns, 1)
        )
        pick = f"<nav class='answer-pick'>Sources of answer: {links}</nav>"
    sections = "".join(_section(i, turn, i == latest) for i, turn in enumerate(turns, 1))
    return f"<div class='sources-scroll'>{pick}{sections}</div>"


def _section(answer: int, turn: dict[str, Any], shown: bool) -> str:
    """One answer's sources, headed by the question they answer."""
    if turn.get("pending"):
        state, body = "pending", _retrieved(answer, turn, "the answer is being written…")
    elif turn.get("stopped"):
        state, body = "stopped", _retrieved(answer, turn, "the answer was stopped.")
    elif turn.get("error"):
        state = "error"
        body = "<p class='hint'>No sources: this question could not be answered.</p>"
    elif not turn["citations"] and (turn.get("abstained") or not turn.get("retrieved")):
        state = "answered"
        body = "<p class='hint'>No sources: the papers in the index do not cover this question.</p>"
    elif not turn["citations"]:
        # Written, but citing nothing: show what it was given rather than deny the papers hold it.
        state = "answered"
        hint = "The answer cites none of the passages it was given: nothing backs it. They were:"
        cards = [{**p, "n": None} for p in turn["retrieved"]]
        body = f"<p class='hint'>{hint}</p>" + "".join(_card(answer, c) for c in cards)
    else:
        state = "answered"
        body = "".join(_card(answer, c) for c in turn["citations"])
    question = " ".join(turn["question"].split())
    if len(question) > HEADER_QUESTION_CHARS:
        question = question[:HEADER_QUESTION_CHARS].rsplit(" ", 1)[0] + "…"
    head = (
        f"<div class='for-question'>Sources of answer {answer}: "
        f"<q>{html.escape(question)}</q></div>"
    )
    head += _legend(turn.get("unsupported") or [])
    if turn.get("narrowed"):
        # "papers by Ding", "in 2021": the question itself limited which papers were searched.
        limits = html.escape("; ".join(turn["narrowed"]))
        head += f"<p class='narrowed'>Searched only: {limits}</p>"
    hidden = "" if shown else " hidden"
    back = (
        f"<a class='back-to-answer' href='#chat' data-answer='{answer}'>"
        f"↑ Back to answer {answer}</a>"
    )
    return (
        f"<section class='answer-sources' id='answer-{answer}' data-state='{state}'{hidden}>"
        f"{back}{head}{body}</section>"
    )


def _legend(unsupported: list[dict[str, Any]]) -> str:
    """What each ⚠ of the answer says, readable without hovering: its sentence and why."""
    if not unsupported:
        return ""
    items = []
    for u in unsupported:
        sentence = " ".join(u.get("sentence", "").split())
        if len(sentence) > LEGEND_SENTENCE_CHARS:
            sentence = sentence[:LEGEND_SENTENCE_CHARS].rsplit(" ", 1)[0] + "…"
        items.append(f"<li><q>{html.escape(sentence)}</q>: {html.escape(why(u).lower())}</li>")
    return (
        "<div class='flags'><p>⚠ marks a sentence its sources do not back:</p>"
        f"<ul>{''.join(items)}</ul></div>"
    )


def _retrieved(answer: int, turn: dict[str, Any], state: str) -> str:
    """The passages the model is reading, before its answer is complete.

    Those the answer has cited so far carry its number (and anchor); the rest say "retrieved".
    """
    if "retrieved" not in turn:
        return "<p class='hint'>Searching the papers…</p>"
    if not turn["retrieved"]:
        return "<p class='hint'>No passage in the index matches this question.</p>"
    numbers = turn.get("numbers", {})
    cards = [{**p, "n": numbers.get(p["n"])} for p in turn["retrieved"]]
    cards.sort(key=lambda c: (c["n"] is None, c["n"] or 0))
    hint = f"<p class='hint'>Retrieved passages; {state}</p>"
    return hint + "".join(_card(answer, c) for c in cards)


def passage_dicts(passages) -> list[dict[str, Any]]:
    """The passages the model is shown as cards, `n` being their number in its prompt."""
    return [
        {
            "n": n,
            "doc_id": p.doc_id,
            "title": p.title,
            "text": p.text,
            "score": p.score,
            "paper": p.metadata.get("paper"),
            "url": p.metadata.get("url"),
            "page": Citation(0, p.doc_id, p.title, p.text, p.score, p.metadata).page,
            "file": p.metadata.get("file"),
            **{k: p.metadata.get(k) for k in ("authors", "year", "venue")},
        }
        for n, p in enumerate(passages, 1)
    ]


def _byline(c: dict[str, Any]) -> str:
    """ "Ines Duarte, Priya Raman · ICML 2023": who wrote a source and where, when known."""
    when = " ".join(str(c[k]) for k in ("venue", "year") if c.get(k) not in (None, ""))
    return " · ".join(part for part in (str(c.get("authors") or ""), when) if part)


def _card(answer: int, c: dict[str, Any]) -> str:
    """One passage: cited ones anchored as `src-<answer>-<n>`, the others marked "retrieved"."""
    score = min(max(float(c["score"]), 0.0), 1.0)
    meta = [
        f"<span class='relevance' title='relevance score {score:.2f}'>relevance "
        f"<meter min='0' max='1' value='{score:.2f}'>{score:.2f}</meter></span>"
    ]
    paper = html.escape(c["paper"]) if c.get("paper") else None
    url = _safe_url(c.get("url"))
    if url:
        meta.insert(0, f"Paper: {_link(url, paper or 'paper')}")
    elif paper:
        meta.insert(0, f"Paper: {paper}")
    if c.get("page"):
        where = f"p. {html.escape(str(c['page']))}"
        link = pdf_link(c.get("file"), c["page"])
        if link:
            href = html.escape(link, quote=True)
            where = f"<a class='page-link' href='{href}' target='_blank' rel='noopener'>{where}</a>"
        meta.insert(0, where)
    anchor = (
        f"<div class='source' id='src-{answer}-{c['n']}'>"
        if c["n"]
        else "<div class='source retrieved'>"
    )
    label = f"[{c['n']}]" if c["n"] else "<span class='badge'>retrieved</span>"
    byline = _byline(c)
    return (
        f"{anchor}<div class='source-head'>{label} {html.escape(c['title'])}</div>"
        + (f"<div class='meta byline'>{html.escape(byline)}</div>" if byline else "")
        + f"<div class='meta'>{' · '.join(meta)}</div>"
        f"{_passage(c)}</div>"
    )


def chat_messages(turns: list[dict[str, Any]], partial: str | None = None) -> list[dict[str, str]]:
    """The chat as Gradio messages, two per turn (message i belongs to turn i // 2), inert."""
    messages = []
    for answer, turn in enumerate(turns, 1):
        messages.append({"role": "user", "content": turn["question"]})
        if turn.get("stopped"):
            content = f"{turn['partial']}\n\n**Stopped.** Press ↻ below to ask again."
        elif turn.get("partial"):
            content = f"{turn['partial']}\n\n⚠️ **The answer was cut off:** {turn['error']}"
        elif turn.get("error"):
            content = f"⚠️ **Could not answer.** {turn['error']}"
        else:
            text = with_flags(turn["answer"], turn.get("unsupported") or [])
            evidence = marker_evidence(turn["answer"], turn.get("citations") or [])
            content = linkify(text, answer, evidence)
        messages.append({"role": "assistant", "content": content})
    if partial is not None:
        messages[-1]["content"] = linkify(partial, len(turns)) or "…"
    messages = [{**m, "content": inert(m["content"])} for m in messages]
    for i, turn in enumerate(turns):
        if turn.get("unsupported"):
            message = messages[2 * i + 1]
            message["content"] = put_flags(message["content"], turn["unsupported"], flag_html)
        if turn.get("error") or turn.get("stopped"):
            messages[2 * i + 1]["content"] += NO_FEEDBACK
    if partial is not None:
        messages[-1]["content"] += WRITING
    return messages


def history_of(turns: list[dict[str, Any]]) -> list[dict[str, str]]:
    """What the model sees of the conversation: answered turns, never errors or stopped ones."""
    history = []
    for turn in turns:
        if not turn.get("error") and not turn.get("stopped") and turn.get("answer"):
            history.append({"role": "user", "content": turn["question"]})
            history.append({"role": "assistant", "content": turn["answer"]})
    return history


def conversation_markdown(turns: list[dict[str, Any]], model: str) -> str:
    """The conversation as a Markdown document, each answer followed by its sources."""

    # Text from documents and models is escaped: a Markdown viewer renders HTML and fetches
    # images, and a document's <img>, <script> or ![image](url) must show as text there, as it
    # does in the UI.
    def esc(text: str) -> str:
        return html.escape(text, quote=False).replace("![", "!\\[")

    lines = ["# Conversation about ICML 2025 papers", "", f"Model: {esc(model)}", ""]
    for turn in turns:
        lines += [f"## {esc(turn['question'])}", ""]
        if turn.get("stopped"):
            lines += [esc(turn["partial"]), "", "_Stopped before the end._", ""]
            continue
        if turn.get("partial"):
            cut = f"_The answer was cut off: {esc(turn['error'])}_"
            lines += [esc(turn["partial"]), "", cut, ""]
            continue
        if turn.get("error"):
            lines += [f"_Could not answer: {esc(turn['error'])}_", ""]
            continue
        unsupported = turn.get("unsupported") or []
        answer = with_flags(turn["answer"], unsupported)
        answer = put_flags(answer, unsupported, lambda u: f" ⚠ _({why(u).lower()})_")
        lines += [esc(answer), ""]
        if turn["citations"]:
            lines += ["Sources:", ""]
            for c in turn["citations"]:
                paper = f" — {esc(c['paper'])}" if c.get("paper") else ""
                # An autolink ends at ">": percent-encoded, a URL cannot close it and add HTML.
                link = _safe_url(c.get("url"))
                url = f" <{quote(link, safe=_URL_SAFE)}>" if link else ""
                title = esc(c["title"])
                lines.append(f"- [{c['n']}] {title}{paper}{url} (score {c['score']:.2f})")
            lines.append("")
    return "\n".join(lines)


def counter_html(length: int, limit: int) -> str:
    """The question box's counter, e.g. '1,234 / 2,000 characters'.

    The page keeps it up to date itself (`questionCounter` in assets/page.js), in the same words.
    """
    return f"<span class='hint'>{length:,} / {limit:,} characters</span>"


def download_name(question: str, day: date) -> str:
    """A conversation's file name: its first question as words joined by '-', then the date."""
    words = re.findall(r"[^\W_]+", question.lower())
    slug = "-".join(words)[:DOWNLOAD_NAME_CHARS].rstrip("-") or "conversation"
    return f"{slug}-{day.isoformat()}.md"


def save_feedback(data_dir: Path, turn: dict[str, Any], vote: str | None) -> Path:
    """Append the vote now standing on an answer (None: taken back) to `feedback.jsonl`.

    Each line names its message and conversation, so a reader takes the last line per
    message id as that answer's vote.
    """
    path = Path(data_dir) / FEEDBACK_FILE
    record = {
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "message_id": turn.get("id"),
        "conversation_id": turn.get("conversation"),
        "vote": vote,
        "question": turn["question"],
        "answer": turn["answer"],
        "citations": turn["citations"],
        "model": turn.get("model"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with _FEEDBACK_LOCK, path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def vote_of(liked: bool | str | None) -> str | None:
    """Gradio's like value as the vote it leaves standing: like, dislike, or None when undone."""
    if liked is True:
        return "like"
    if liked is False:
        return "dislike"
    return str(liked).lower() if liked else None


def corpus_documents(bot) -> list[dict[str, Any]]:
    """The indexed documents as the index holds them, whatever file or server they came from."""
    docs = [
        {
            "doc_id": d.doc_id,
            "title": d.title,
            "paper": d.metadata.get("paper"),
            "url": _safe_url(d.metadata.get("url")),
            "text": d.text,
            "pages": d.metadata.get("pages"),  # PDFs: their page count, and the file served
            "file": d.metadata.get("file"),
        }
        for d in bot.documents()
    ]
    return sorted(docs, key=lambda d: d["title"].lower())


def corpus_table(docs: list[dict[str, Any]]) -> str:
    """An HTML table of the indexed documents."""
    rows = []
    for i, d in enumerate(docs, 1):
        paper = html.escape(d["paper"] or "")
        if d["url"]:
            paper = _link(d["url"], paper or "link")
        if d.get("pages"):
            label = f"PDF, {d['pages']} page{'s' if d['pages'] != 1 else ''}"
            link = pdf_link(d.get("file"), "1")
            pdf = _link(link, label) if link else label
            paper = f"{paper} · {pdf}" if paper else pdf
        rows.append(
            f"<tr><td>{i}</td><td>{html.escape(d['title'])}</td><td>{paper}</td>"
            f"<td><code>{html.escape(d['doc_id'])}</code></td></tr>"
        )
    return (
        f"<p>{len(docs)} documents indexed.</p><div class='table-scroll'><table id='corpus-list'>"
        "<tr><th>#</th><th>Title</th><th>Paper</th><th>Id</th></tr>"
        + "".join(rows)
        + "</table></div>"
    )


def document_markdown(doc: dict[str, Any]) -> str:
    """One document, readable."""
    head = [f"## {doc['title']}"]
    if doc["paper"] or doc["url"]:
        paper = doc["paper"] or doc["url"]
        head.append(f"Paper: [{paper}]({doc['url']})" if doc["url"] else f"Paper: {paper}")
    return inert("\n\n".join([*head, doc["text"]]))
