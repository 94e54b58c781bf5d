"""``tool_choice="none"`` with a typed answer: refused where the model could never answer."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tooldeck import Agent, AssistantOutput, ModelSettings, ScriptedModel


class City(BaseModel):
    name: str


class NativeScripted(ScriptedModel):
    """A ScriptedModel taken for one with structured output (the schema goes with it)."""

    native_output = True


def test_none_with_a_final_answer_tool_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="can never answer") as refused:
        Agent(ScriptedModel([]), output_type=City, settings=ModelSettings(tool_choice="none"))
    assert str(refused.value) == (
        "tool_choice='none' with output_type can never answer: the typed answer is asked for "
        "with the final_answer tool, which tool_choice='none' forbids the model to call. Leave "
        "tool_choice 'auto' (tools the model need not call), or use a model with structured "
        "output (output_mode='native')"
    )


def test_none_with_structured_output_answers() -> None:
    model = NativeScripted([AssistantOutput(content='{"name": "Oslo"}')])
    agent = Agent(model, output_type=City, settings=ModelSettings(tool_choice="none"))
    assert agent.run_sync("Capital of Norway?").output == City(name="Oslo")
    assert model.requests[0].settings.tool_choice == "none"
