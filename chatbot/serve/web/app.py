"""The web UI: a Gradio chat that streams cited answers beside the passages they cite."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import gradio as gr
from starlette.middleware import Middleware

from chatbot.errors import ConfigError, EmptyIndexError
from chatbot.serve.guard import LOGIN_ATTEMPTS, LOGIN_COOLDOWN, Gate, Guard
from chatbot.serve.openai_api import routes as api
from chatbot.serve.web.assets import CSS, JS, SAVE_JS, submit_js
from chatbot.serve.web.documents import documents_section, launch_options
from chatbot.serve.web.handlers import EXAMPLES, Handlers
from chatbot.serve.web.view import (
    NO_SOURCES,
    counter_html,
)

log = logging.getLogger(__name__)

# Gradio's login form shows nothing when a login is refused for being one too many: say it here.
LOGIN_NOTE = (
    f"After {LOGIN_ATTEMPTS} wrong passwords, each further wrong one is refused for a while "
    f"({LOGIN_COOLDOWN:.0f} s at first, twice as long after each); the right one always gets in."
)
KEY_NOTE = f"Log in with this server's API key as the password (any user name). {LOGIN_NOTE}"
# The browser calls the event handlers; only the `chat` endpoint is part of the HTTP API.
PRIVATE = {"api_visibility": "private"}


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
                # The page follows a new question itself (assets/page.js: followChat).
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
    # Gradio skips a step ("once") while the same step of an earlier submit is still on its way:
    # a question sent right after an empty Enter would show in the chat and never be answered.
    # Every step runs ("multiple"); the server's claim allows one answer per page at a time.
    steps = {**PRIVATE, "trigger_mode": "multiple"}
    now = {**steps, "show_progress": "hidden"}
    tab.box.submit(**page_submit).then(ui.take, asked, taken, **now).then(
        ui.respond, [asked, turns], outputs, **steps
    )
    tab.send.click(**page_submit).then(ui.take, asked, taken, **now).then(
        ui.respond, [asked, turns], outputs, **steps
    )
    tab.examples.click(ui.example, tab.examples, tab.box, **now).then(**page_submit).then(
        ui.take, asked, taken, **now
    ).then(ui.respond, [asked, turns], outputs, **steps)
    tab.chat.retry(ui.retry, turns, [turns, asked, tab.send, tab.stop], **now).then(
        ui.respond, [asked, turns], outputs, **steps
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


def parse_auth(auth: str | tuple[str, str] | None) -> tuple[str, str] | None:
    """`"user:password"` as a pair; raises ConfigError when it has another shape."""
    if auth is None:
        return None
    if isinstance(auth, tuple):
        user, sep, password = auth[0], ":", auth[1]
    else:
        user, sep, password = auth.partition(":")
    # A user or password of spaces alone is one anyone could guess.
    if not sep or not user.strip() or not password.strip():
        raise ConfigError(
            "--auth (or CHATBOT_AUTH) must look like user:password, neither part empty or only "
            "spaces."
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
            # response carries the CSP (serve/guard.py).
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
