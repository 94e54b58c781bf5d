"""The embedded local model pauses and resumes from JSON, and gives typed answers."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tooldeck import Agent, Approve, ModelSettings, tool
from tooldeck.models.local import LocalModel


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file from the user's disk.

    Args:
        path: The file to delete, e.g. "notes.txt".
    """
    return f"The file {path} was deleted."


@pytest.mark.slow
def test_a_local_run_pauses_for_approval_and_resumes_from_json() -> None:
    model = LocalModel()
    settings = ModelSettings(tool_choice="delete_file", temperature=0.0)
    agent = Agent(model, [delete_file], settings=settings)
    paused = agent.run_sync('Delete the file "notes.txt".')
    assert paused.stop_reason == "paused"
    (pending,) = paused.pending
    assert pending.call.name == "delete_file"
    assert pending.kind == "approval"
    assert pending.call.id == "call_1"
    assert paused.checkpoint is not None

    fresh = Agent(model, [delete_file], settings=settings)
    done = fresh.resume_sync(paused.checkpoint.to_json(), {"call_1": Approve()})

    assert done.stop_reason == "answer"
    assert done.answer
    tool_message = done.messages[2]
    assert (tool_message.role, tool_message.tool_call_id) == ("tool", "call_1")
    assert tool_message.content.startswith("The file ")
    assert done.usage.requests == 2


class Weather(BaseModel):
    city: str
    temperature_c: int
    sunny: bool


@pytest.mark.slow
def test_a_local_model_gives_a_typed_answer_valid_on_the_first_try() -> None:
    agent = Agent(LocalModel(), output_type=Weather)
    result = agent.run_sync("In Tokyo it is 24 degrees and sunny. Report the weather.")
    assert isinstance(result.output, Weather)
    assert result.usage.requests == 1
    assert result.tool_trace[0].call.name == "final_answer"
    assert result.tool_trace[0].result.ok
