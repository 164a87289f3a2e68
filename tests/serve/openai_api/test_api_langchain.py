"""LangChain's standard chat model tests, run through `ChatOpenAI` against the chatbot's /v1 API.

The server is the real `chatbot serve --api-only` (offline model, one per session); the tests are
LangChain's own (`langchain-tests`), so a LangChain chain that works with OpenAI works with it.
The chatbot answers in text from its papers: tool calling, structured output and non-text input
are declared unsupported, which the suite skips, and which the server refuses with a 400.
"""

from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI
from langchain_tests.integration_tests import ChatModelIntegrationTests

from chatbot.serve.openai_api import routes as api


class TestChatbotThroughChatOpenAI(ChatModelIntegrationTests):
    url = ""

    @pytest.fixture(autouse=True)
    def _server(self, api_url: str) -> None:
        # The suite builds models from `chat_model_params` alone, so the URL lives on the class.
        type(self).url = api_url

    @property
    def chat_model_class(self) -> type[ChatOpenAI]:
        return ChatOpenAI

    @property
    def chat_model_params(self) -> dict:
        # stream_usage: ChatOpenAI asks a server other than OpenAI's for streamed usage only
        # when told to (stream_options.include_usage).
        return {
            "model": api.MODEL_ID,
            "base_url": self.url,
            "api_key": "unused",
            "stream_usage": True,
        }

    @property
    def has_tool_calling(self) -> bool:
        return False

    @property
    def has_tool_choice(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False

    @property
    def supports_json_mode(self) -> bool:
        return False

    @property
    def supports_model_override(self) -> bool:
        # The server answers as one model; any other name is a 404.
        return False

    @property
    def returns_usage_metadata(self) -> bool:
        return True


class TestChatbotThroughTheResponsesApi(TestChatbotThroughChatOpenAI):
    """The same suite through `POST /v1/responses`, where LangChain keeps the sources."""

    @property
    def chat_model_params(self) -> dict:
        return {**super().chat_model_params, "use_responses_api": True}
