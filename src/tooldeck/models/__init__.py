"""Model adapters: the ``Model`` interface (``base.py``, with ``AskModel``, the base of
tooldeck's own models, which take a request as one ``Ask``), ``WrapperModel`` for a model
around a model (``wrapper.py``), ``ScriptedModel`` for tests, a model string resolved to a
model (``resolve.py``), and one package per provider (``openai/``, ``anthropic/``,
``gemini/``) and the embedded ``local/`` model. Provider SDKs are imported only by the
adapter that needs them, when a model is built.

May import: ``tooldeck.errors``, ``tooldeck.messages``, ``tooldeck._untrusted``. Never
``tooldeck.tools`` or ``tooldeck.run``; only this room imports a provider's SDK.
"""

from tooldeck.models.base import Model, ModelSettings, ToolChoice
from tooldeck.models.fallback import FallbackModel, RetryingModel, RetryPolicy
from tooldeck.models.prices import ModelPrices
from tooldeck.models.scripted import RecordedRequest, ScriptedModel
from tooldeck.models.wrapper import WrapperModel

__all__ = [
    "FallbackModel",
    "Model",
    "ModelPrices",
    "ModelSettings",
    "RecordedRequest",
    "RetryPolicy",
    "RetryingModel",
    "ScriptedModel",
    "ToolChoice",
    "WrapperModel",
]
