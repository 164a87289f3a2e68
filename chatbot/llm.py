"""Chat models by name: the offline model, or any OpenAI-compatible server through ChatOpenAI."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from .settings import Settings


def make_chat_model(settings: Settings) -> BaseChatModel:
    """The chat model the settings name; the offline one when no real model is configured."""
    if settings.uses_offline_model:
        from .offline import OfflineChatModel

        return OfflineChatModel()
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=settings.model_name,
        api_key=settings.openai_api_key or "not-needed",
        base_url=settings.openai_base_url,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        max_tokens=settings.max_answer_tokens,
        temperature=0,
    )
