"""Model adapters. Provider SDKs are imported only by the adapter that needs them."""

from tooldeck.models.base import Model, ModelSettings, ToolChoice
from tooldeck.models.scripted import ModelRequestRecord, ScriptedModel

__all__ = ["Model", "ModelRequestRecord", "ModelSettings", "ScriptedModel", "ToolChoice"]
