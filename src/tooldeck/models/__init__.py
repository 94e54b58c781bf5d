"""Model adapters. Provider SDKs are imported only by the adapter that needs them."""

from tooldeck.models.base import Model, ModelSettings, ToolChoice
from tooldeck.models.scripted import RecordedRequest, ScriptedModel

__all__ = ["Model", "ModelSettings", "RecordedRequest", "ScriptedModel", "ToolChoice"]
