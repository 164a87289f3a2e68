"""`POST /v1/responses`: the answer with its sources as annotations that LangChain keeps."""

from __future__ import annotations

import threading

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from openai import OpenAI

from chatbot.serve.openai_api import routes as api
from tests.serve.openai_api.test_api import api_only, model_server

QUESTION = "What is generative social choice?"
MODEL = api.MODEL_ID


def client(base: str) -> OpenAI:
    return OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=60)


def _citations(message: AIMessage) -> list[dict]:
    return [
        note
        for block in message.content_blocks
        if block["type"] == "text"
        for note in block.get("annotations", [])
        if note["type"] == "citation"
    ]


def test_langchain_keeps_each_marker_as_a_citation_block_whole_and_streamed(api_url):
    model = ChatOpenAI(model=MODEL, base_url=api_url, api_key="unused", use_responses_api=True)
    reply = model.invoke(QUESTION)
    text = reply.text
    assert "[1]" in text and "\n\nSources:\n- [1] " in text, text
    notes = _citations(reply)
    assert notes, f"the sources reach LangChain as data: {reply.content}"
    for note in notes:
        assert text[note["start_index"] : note["end_index"]] == "[1]", note
        assert (
            note["url"].startswith("https://icml.cc/")
            and "Generative Social Choice" in note["title"]
        ), note
    assert reply.usage_metadata["input_tokens"] > 0 < reply.usage_metadata["output_tokens"]
    streamed = None
    for chunk in model.stream(QUESTION):
        streamed = chunk if streamed is None else streamed + chunk
    assert streamed.text == text, "the streamed pieces add up to the whole reply"
    assert _citations(streamed) == notes, "the same citations, streamed"
    assert streamed.usage_metadata == reply.usage_metadata


def test_a_follow_up_sends_the_earlier_reply_back_as_langchain_gives_it(api_url):
    model = ChatOpenAI(model=MODEL, base_url=api_url, api_key="unused", use_responses_api=True)
    first = model.invoke(QUESTION)
    follow = model.invoke(
        [HumanMessage(QUESTION), first, HumanMessage("Which systems does it mention?")]
    )
    assert "Polis" in follow.text, f"answered about the paper of the first reply: {follow.text}"
    assert _citations(follow), follow.content


def test_the_openai_sdk_reads_the_reply_and_its_events(api_url):
    whole = client(api_url).responses.create(model=MODEL, input=QUESTION)
    chat = client(api_url).chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": QUESTION}]
    )
    assert whole.status == "completed"
    assert whole.output_text == chat.choices[0].message.content, "the same reply in either API"
    part = whole.output[0].content[0]
    assert part.annotations and part.annotations[0].type == "url_citation"
    assert whole.model_extra["citations"][0]["doc_id"] == "generative-social-choice"
    assert whole.usage.input_tokens > 0 < whole.usage.output_tokens
    events = list(client(api_url).responses.create(model=MODEL, input=QUESTION, stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == whole.output_text
    added = [e.annotation for e in events if e.type == "response.output_text.annotation.added"]
    assert len(added) == len(part.annotations)
    assert [e.sequence_number for e in events] == list(range(1, len(events) + 1))


def test_a_source_without_a_link_is_a_file_citation_naming_its_document(api_data_notes):
    url, doc_id = api_data_notes
    reply = client(url).responses.create(model=MODEL, input="How fast do kelp forests grow?")
    notes = reply.output[0].content[0].annotations
    assert notes and {n.type for n in notes} == {"file_citation"}, reply.output_text
    assert notes[0].file_id == doc_id, notes


@pytest.fixture(scope="module")
def api_data_notes(tmp_path_factory):
    """A served index of one note with no link."""
    from chatbot import Chatbot, Settings

    root = tmp_path_factory.mktemp("notes")
    (root / "docs").mkdir()
    (root / "docs" / "kelp-note.md").write_text(
        "# Kelp forests\n\nKelp forests store carbon in their fronds and grow up to half a metre "
        "a day in cold coastal water.\n"
    )
    bot = Chatbot(Settings.load(env_file=None, data_dir=root / "data", corpus_dir=root / "docs"))
    running = api.serve(bot, port=0, block=False)
    yield running.url, "kelp-note"
    running.close()


@pytest.mark.parametrize(
    ("param", "extra"),
    [
        ("tools", {"tools": [{"type": "function", "name": "f", "parameters": {}}]}),
        ("text.format", {"text": {"format": {"type": "json_object"}}}),
        ("previous_response_id", {"previous_response_id": "resp_1"}),
    ],
)
def test_what_the_chatbot_cannot_honour_is_refused_with_400(api_url, param, extra):
    with pytest.raises(openai.BadRequestError) as refused:
        client(api_url).responses.create(model=MODEL, input=QUESTION, **extra)
    error = refused.value.response.json()["error"]
    assert error["param"] == param and error["code"] == "unsupported_parameter", error


def test_an_unknown_model_or_an_image_is_refused(api_url):
    with pytest.raises(openai.NotFoundError):
        client(api_url).responses.create(model="gpt-4o", input=QUESTION)
    image = [{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}]
    body = {"model": MODEL, "input": [{"role": "user", "content": image}]}
    refused = httpx.post(f"{api_url}/responses", json=body, timeout=30)
    assert refused.status_code == 400 and "text only" in refused.json()["error"]["message"]


def test_a_reply_the_model_cuts_off_ends_with_an_error_event(built_index, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(built_index, data)
    release = threading.Event()
    release.set()
    with model_server(data, release, cut=True) as (settings, _), api_only(settings) as url:
        stream = client(url).responses.create(model=MODEL, input=QUESTION, stream=True)
        kinds = []
        with pytest.raises(openai.APIError) as cut:
            for e in stream:
                kinds.append(e.type)
    assert "response.output_text.delta" in kinds and "response.completed" not in kinds, kinds
    assert "middle" in str(cut.value), f"the error says the answer was cut off: {cut.value}"
