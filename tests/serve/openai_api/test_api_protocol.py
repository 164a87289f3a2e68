"""The /v1 API as the official `openai` client sees it: sources as data, refusals, token counts."""

from __future__ import annotations

import httpx
import openai
import pytest
from openai import OpenAI

from chatbot.serve.openai_api import routes as api
from chatbot.text.tokens import count_tokens

QUESTION = "What is generative social choice?"
MODEL = api.MODEL_ID


def client(base: str) -> OpenAI:
    """The official client, without retries so each status is seen as sent."""
    return OpenAI(base_url=base, api_key="unused", max_retries=0, timeout=60)


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_the_message_carries_its_sources_as_annotations_and_citations(api_url):
    message = (
        (client(api_url).chat.completions.create(model=MODEL, messages=user(QUESTION)))
        .choices[0]
        .message
    )
    citations = message.model_extra["citations"]
    assert citations and citations[0]["doc_id"] == "generative-social-choice", citations
    assert {"n", "doc_id", "title", "url", "quote", "text"} <= citations[0].keys()
    linked = {c["n"]: c for c in citations if c["url"]}
    assert message.annotations, "each [n] of a source with a link is an OpenAI url_citation"
    for note in message.annotations:
        assert note.type == "url_citation"
        cite = note.url_citation
        marker = message.content[cite.start_index : cite.end_index]
        n = int(marker.strip("[]"))
        assert marker == f"[{n}]", f"the annotation spans the marker it stands for: {marker!r}"
        assert (cite.url, cite.title) == (linked[n]["url"], linked[n]["title"])
    assert f"- [1] {citations[0]['title']}" in message.content, "footnotes stay for plain clients"


def test_a_stream_ends_with_a_chunk_carrying_the_same_sources(api_url):
    whole = client(api_url).chat.completions.create(model=MODEL, messages=user(QUESTION))
    chunks = list(
        client(api_url).chat.completions.create(model=MODEL, messages=user(QUESTION), stream=True)
    )
    last = chunks[-1].choices[0]
    assert last.finish_reason == "stop"
    extra = last.delta.model_extra
    assert extra["citations"] == whole.choices[0].message.model_extra["citations"]
    assert extra["annotations"] == [a.model_dump() for a in whole.choices[0].message.annotations]


def test_usage_counts_real_tokens_whole_and_streamed(api_url):
    whole = client(api_url).chat.completions.create(model=MODEL, messages=user(QUESTION))
    used = whole.usage
    content = whole.choices[0].message.content
    assert used.completion_tokens == count_tokens(content), "the reply's tokens, counted"
    assert used.prompt_tokens > count_tokens(QUESTION) + 100, (
        f"the prompt is the question and the passages read, not 0: {used}"
    )
    assert used.total_tokens == used.prompt_tokens + used.completion_tokens
    chunks = list(
        client(api_url).chat.completions.create(
            model=MODEL,
            messages=user(QUESTION),
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage == used, "the same counts, streamed"


def test_an_abstention_still_counts_its_tokens(api_url):
    reply = client(api_url).chat.completions.create(
        model=MODEL, messages=user("Who won the 1998 football world cup?")
    )
    assert reply.model_extra["abstained"] is True
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0, reply.usage


def _error(e: openai.APIStatusError | httpx.Response) -> dict:
    response = e if isinstance(e, httpx.Response) else e.response
    body = response.json()
    assert set(body) == {"error"}, f"OpenAI's error shape, not FastAPI's: {body}"
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, f"OpenAI's error shape: {error}"
    return error


def test_an_unknown_model_is_404_as_the_models_route_says(api_url):
    ask = client(api_url).chat.completions.create
    with pytest.raises(openai.NotFoundError) as listed:
        client(api_url).models.retrieve("gpt-4o")
    for stream in (False, True):
        with pytest.raises(openai.NotFoundError) as asked:
            ask(model="gpt-4o", messages=user(QUESTION), stream=stream)
        error = _error(asked.value)
        assert error == _error(listed.value) | {"param": "model"}, error
        assert MODEL in error["message"], f"the message names the model to use: {error}"
    no_model = httpx.post(f"{api_url}/chat/completions", json={"messages": user(QUESTION)})
    assert no_model.status_code == 400 and _error(no_model)["param"] == "model", no_model.text


@pytest.mark.parametrize(
    ("param", "extra"),
    [
        ("n", {"n": 2}),
        ("tools", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}),
        ("tool_choice", {"tool_choice": "required"}),
        ("response_format", {"response_format": {"type": "json_object"}}),
        ("logprobs", {"logprobs": True}),
        ("modalities", {"modalities": ["text", "audio"]}),
    ],
)
def test_a_parameter_the_chatbot_cannot_honour_is_refused_with_400_naming_it(api_url, param, extra):
    with pytest.raises(openai.BadRequestError) as refused:
        client(api_url).chat.completions.create(model=MODEL, messages=user(QUESTION), **extra)
    error = _error(refused.value)
    assert error["param"] == param and f"'{param}'" in error["message"], error
    assert error["code"] == "unsupported_parameter", error


def test_an_image_in_the_question_is_refused_rather_than_dropped(api_url):
    parts = [
        {"type": "text", "text": "What does this figure show?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    with pytest.raises(openai.BadRequestError) as refused:
        client(api_url).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": parts}]
        )
    error = _error(refused.value)
    assert error["param"] == "messages.0.content" and "text only" in error["message"], error


def test_sampling_settings_are_accepted_and_the_answer_is_the_same(api_url):
    ask = client(api_url).chat.completions.create
    plain = ask(model=MODEL, messages=user(QUESTION))
    tuned = ask(
        model=MODEL,
        messages=user(QUESTION),
        n=1,
        temperature=0.2,
        top_p=0.9,
        seed=7,
        stop=["\n\n\n"],
        max_tokens=256,
        user="ada",
    )
    assert tuned.choices[0].message.content == plain.choices[0].message.content


def test_a_wrong_method_or_path_gets_openai_errors_not_fastapis(api_url):
    wrong_method = httpx.get(f"{api_url}/chat/completions", timeout=30)
    assert wrong_method.status_code == 405, wrong_method.text
    assert "POST" in _error(wrong_method)["message"] and wrong_method.headers["allow"] == "POST"
    posted_models = httpx.post(f"{api_url}/models", json={}, timeout=30)
    assert posted_models.status_code == 405 and "GET" in _error(posted_models)["message"]
    unknown = httpx.post(f"{api_url}/completions", json={"prompt": "hi"}, timeout=30)
    assert unknown.status_code == 404, unknown.text
    assert "/v1/chat/completions" in _error(unknown)["message"], "names what is served"
    with pytest.raises(openai.NotFoundError) as embeddings:
        client(api_url).embeddings.create(model=MODEL, input="hi")
    assert _error(embeddings.value)["code"] == "unknown_url"
