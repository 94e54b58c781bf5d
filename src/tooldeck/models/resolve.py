"""Model strings -> Model objects, in one place.

``"local"`` and ``"local:/path/model.gguf"`` (llama.cpp in-process), ``"openai:NAME"``
(Responses API), ``"openai-chat:NAME"`` (Chat Completions, any compatible server with
``base_url``), ``"azure:DEPLOYMENT"``, ``"anthropic:claude-..."`` (Messages API) and
``"gemini:NAME"`` (Gemini API). Provider modules are imported only when named.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tooldeck.errors import ModelNotConfigured
from tooldeck.models.base import Model


def _local(name: str, options: dict[str, Any]) -> Model:
    from tooldeck.models.local import LocalModel

    return LocalModel(name or None, **options)


def _openai(name: str, options: dict[str, Any]) -> Model:
    from tooldeck.models.openai import OpenAIResponsesModel

    return OpenAIResponsesModel(name, **options)


def _openai_chat(name: str, options: dict[str, Any]) -> Model:
    from tooldeck.models.openai import OpenAIChatModel

    return OpenAIChatModel(name, **options)


def _azure(name: str, options: dict[str, Any]) -> Model:
    from tooldeck.models.openai import OpenAIChatModel

    return OpenAIChatModel.azure(name, **options)


def _anthropic(name: str, options: dict[str, Any]) -> Model:
    from tooldeck.models.anthropic import AnthropicModel

    return AnthropicModel(name, **options)


def _gemini(name: str, options: dict[str, Any]) -> Model:
    from tooldeck.models.gemini import GeminiModel

    return GeminiModel(name, **options)


_PROVIDERS: dict[str, Callable[[str, dict[str, Any]], Model]] = {
    "local": _local,
    "openai": _openai,
    "openai-chat": _openai_chat,
    "azure": _azure,
    "anthropic": _anthropic,
    "gemini": _gemini,
}


def resolve_model(model: Model | str, **options: Any) -> Model:
    """A Model as is; a string like ``"openai:gpt-4.1-mini"`` as the model it names.

    ``options`` go to the adapter's constructor (e.g. ``base_url=``, ``api_key=``).
    """
    if isinstance(model, Model):
        return model
    provider, _, name = model.partition(":")
    factory = _PROVIDERS.get(provider)
    if factory is None:
        known = ", ".join(f"'{key}:...'" for key in _PROVIDERS)
        raise ModelNotConfigured(f"unknown model {model!r}; use 'local' or one of {known}")
    if provider != "local" and not name:
        raise ModelNotConfigured(f"model {model!r} names no model; write '{provider}:MODEL_NAME'")
    return factory(name, options)
