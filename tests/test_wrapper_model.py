"""WrapperModel: a model around a model passes every member of ``Model`` through in one place,
and tooldeck's own wrappers (fallback, retries, tracing, durable steps, typed-answer
fallbacks) override only what they change."""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import tooldeck
from tooldeck import Agent, AssistantOutput, Model, ModelSettings, ScriptedModel, tool
from tooldeck.durable._steps import DurableModel
from tooldeck.errors import ModelUnavailable
from tooldeck.messages import ToolCall
from tooldeck.models import FallbackModel, RetryingModel, RetryPolicy, WrapperModel, base
from tooldeck.models.base import Ask, StreamItem
from tooldeck.observe._spans import TracedModel
from tooldeck.run._engine.prompted import ForcedCallHint, PromptedFallback

SRC = Path(tooldeck.__file__).resolve().parent

MEMBERS = sorted(name for name in dir(Model) if not name.startswith("_"))
"""Every public member of the ``Model`` interface, as it is now: a member added later is
checked without this file changing."""
METHODS = [name for name in MEMBERS if callable(inspect.getattr_static(Model, name))]
DATA = [name for name in MEMBERS if name not in METHODS]


# --- a user's own wrapper ---------------------------------------------------------------


class Shouting(WrapperModel):
    """A user's wrapper: the answer in capitals, nothing else changed."""

    async def complete(self, messages, tools, settings, instructions=""):
        output = await self.wrapped.complete(messages, tools, settings, instructions)
        return output.model_copy(update={"content": output.content.upper()})


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_a_users_wrapper_that_overrides_one_method_runs_an_agent() -> None:
    call = ToolCall.from_json("c1", "weather", '{"city": "Oslo"}')
    inner = ScriptedModel(
        [AssistantOutput(tool_calls=(call,)), AssistantOutput(content="It is sunny in Oslo")]
    )
    model = Shouting(inner)

    result = Agent(model, [weather], instructions="Be brief.").run_sync("Weather in Oslo?")

    assert result.answer == "IT IS SUNNY IN OSLO"
    assert [t.result.output for t in result.tool_trace] == ["sunny in Oslo"]
    assert [r.instructions for r in inner.requests] == ["Be brief.", "Be brief."]
    assert inner.requests[1].messages[-1].content == "sunny in Oslo"
    assert model.name == "scripted"
    assert model.native_output is False


async def test_a_users_wrapper_streams_through_the_wrapped_model_when_it_keeps_stream() -> None:
    inner = ScriptedModel([AssistantOutput(content="hello")])

    events = [e async for e in Agent(Shouting(inner)).stream("Hi", deltas=True)]

    assert events[-1].result.answer == "hello"  # type: ignore[union-attr]
    assert len(inner.requests) == 1


# --- every member of Model reaches the wrapped model ------------------------------------


class Probe(ScriptedModel):
    """A wrapped model whose every member is replaced, per instance, by a recorder."""


Calls = list[tuple[str, dict[str, Any]]]


def _recorder(name: str, declared: Any, calls: Calls, returned: object) -> Callable[..., Any]:
    """A stand-in for ``Model.<name>`` of the same kind (coroutine, async generator, plain)
    that notes the arguments it is given, bound to the declared signature."""
    signature = inspect.signature(declared)
    parameters = list(signature.parameters.values())[1:]  # without self
    unbound = signature.replace(parameters=parameters)

    def note(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        calls.append((name, dict(unbound.bind(*args, **kwargs).arguments)))

    if inspect.isasyncgenfunction(declared):

        async def items(*args: Any, **kwargs: Any) -> Any:
            note(args, kwargs)
            yield returned

        return items
    if inspect.iscoroutinefunction(declared):

        async def awaited(*args: Any, **kwargs: Any) -> Any:
            note(args, kwargs)
            return returned

        return awaited

    def plain(*args: Any, **kwargs: Any) -> Any:
        note(args, kwargs)
        return returned

    return plain


def _unlike_the_default(name: str) -> object:
    """A value for attribute ``name`` of the type ``Model`` gives it, but not its default."""
    default = inspect.getattr_static(Model, name)
    if isinstance(default, bool):
        return not default
    if isinstance(default, str):
        return f"probe of {name}"
    if isinstance(default, int | float):
        return default + 1
    return object()


def _probe(calls: Calls) -> tuple[Probe, dict[str, object]]:
    """A wrapped model with a recorder for each method and a value of its own for each
    attribute; and what each member gives back."""
    inner = Probe([])
    given: dict[str, object] = {}
    for name in METHODS:
        given[name] = object()
        declared = inspect.getattr_static(Model, name)
        setattr(inner, name, _recorder(name, declared, calls, given[name]))
    for name in DATA:
        given[name] = _unlike_the_default(name)
        setattr(inner, name, given[name])
    return inner, given


async def _call(model: Model, name: str) -> tuple[object, dict[str, Any]]:
    """Call ``model.<name>`` with a fresh object for each parameter; what it gave (an async
    generator's only item) and the arguments sent."""
    declared = inspect.getattr_static(Model, name)
    parameters = list(inspect.signature(declared).parameters.values())[1:]
    sent = {p.name: object() for p in parameters}
    positional = [sent[p.name] for p in parameters if p.kind != p.KEYWORD_ONLY]
    keywords = {p.name: sent[p.name] for p in parameters if p.kind == p.KEYWORD_ONLY}
    result = getattr(model, name)(*positional, **keywords)
    if inspect.isasyncgen(result):
        items = [item async for item in result]
        assert len(items) == 1, name
        return items[0], sent
    if inspect.isawaitable(result):
        return await result, sent
    return result, sent


def test_the_probe_knows_the_interface_it_checks() -> None:
    assert {"complete", "stream", "count_tokens", "aclose"} <= set(METHODS)
    assert {"name", "native_output"} <= set(DATA)


@pytest.mark.parametrize("name", METHODS)
async def test_every_method_of_model_reaches_the_wrapped_model(name: str) -> None:
    calls: Calls = []
    inner, given = _probe(calls)

    returned, sent = await _call(WrapperModel(inner), name)

    assert calls == [(name, sent)], f"WrapperModel.{name} does not pass its call through"
    assert returned is given[name], f"WrapperModel.{name} does not give back what it got"


@pytest.mark.parametrize("name", DATA)
def test_every_attribute_of_model_is_the_wrapped_models(name: str) -> None:
    inner, given = _probe([])

    assert given[name] != inspect.getattr_static(Model, name)
    assert getattr(WrapperModel(inner), name) == given[name], f"WrapperModel.{name}"


class _NoSpans:
    """TracedModel's spans, for members that never open one."""


WRAPPERS: dict[type[WrapperModel], Callable[[Model], WrapperModel]] = {
    FallbackModel: lambda inner: FallbackModel(inner, ScriptedModel([])),
    RetryingModel: RetryingModel,
    TracedModel: lambda inner: TracedModel(inner, _NoSpans()),  # type: ignore[arg-type]
    DurableModel: lambda inner: DurableModel(inner, "agent"),
    PromptedFallback: lambda inner: PromptedFallback(inner, {"type": "object"}),
    ForcedCallHint: ForcedCallHint,
}
"""Each of tooldeck's wrappers, built around a model."""

ANSWERED_BY = {"complete": "answer", "stream": "stream_answer"}
"""The method of tooldeck's models that does the work of each of ``Model``'s that take a
request (``AskModel`` packs the request into an ``Ask`` and calls it)."""

KEPT = [
    (cls, name)
    for cls in WRAPPERS
    for name in METHODS
    if getattr(cls, name) is getattr(WrapperModel, name)
    and getattr(cls, ANSWERED_BY.get(name, name))
    is getattr(WrapperModel, ANSWERED_BY.get(name, name))
]
"""(wrapper, method) for each method a wrapper leaves to WrapperModel."""


def test_tooldecks_wrappers_leave_count_tokens_and_aclose_to_wrapper_model() -> None:
    kept = {(cls.__name__, name) for cls, name in KEPT}
    assert {(cls.__name__, "count_tokens") for cls in WRAPPERS} <= kept
    assert {(cls.__name__, "aclose") for cls in WRAPPERS if cls is not FallbackModel} <= kept


@pytest.mark.parametrize(("cls", "name"), KEPT, ids=[f"{c.__name__}.{n}" for c, n in KEPT])
async def test_tooldecks_wrappers_pass_through_every_method_they_do_not_change(
    cls: type[WrapperModel], name: str
) -> None:
    calls: Calls = []
    inner, given = _probe(calls)

    returned, sent = await _call(WRAPPERS[cls](inner), name)

    assert calls == [(name, sent)], f"{cls.__name__}.{name}"
    assert returned is given[name], f"{cls.__name__}.{name}"


async def test_a_durable_models_stream_is_its_recorded_step_not_the_wrapped_stream() -> None:
    """A durable run records whole turns: its stream must go through ``complete`` (the
    step), never straight to the wrapped model's stream."""
    turn = AssistantOutput(content="recorded")
    model = DurableModel(ScriptedModel([AssistantOutput(content="asked directly")]), "agent")
    asked: list[str] = []

    async def step(*args: Any) -> AssistantOutput:
        asked.append("step")
        return turn

    model.complete = step  # type: ignore[method-assign]
    items: list[StreamItem] = [item async for item in model.stream([], [], ModelSettings(), "")]

    assert items == [turn]
    assert asked == ["step"]


# --- tooldeck's wrappers: WrapperModel subclasses, no pass-through re-declared -----------


def _is_wrapper_base(base: ast.expr) -> bool:
    return (isinstance(base, ast.Name) and base.id == "WrapperModel") or (
        isinstance(base, ast.Attribute) and base.attr == "WrapperModel"
    )


FORWARDS = {"answer": "answer_of", "stream_answer": "stream_of"}
"""The function that hands an ``Ask`` to a held model, for each method that takes one."""


def _same_call(node: ast.expr | None, method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True for ``self.<anything>.<method>(<the method's own parameters, in order>)``, or
    ``answer_of(self.<anything>, ask)`` in ``answer`` (``stream_of`` in ``stream_answer``)."""
    if isinstance(node, ast.Await):
        node = node.value
    if not isinstance(node, ast.Call):
        return False
    args = list(node.args)
    if isinstance(node.func, ast.Attribute) and node.func.attr == method.name:
        target: ast.expr | None = node.func.value
    elif isinstance(node.func, ast.Name) and node.func.id == FORWARDS.get(method.name) and args:
        target = args.pop(0)
    else:
        return False
    on_self = (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    )
    own = [a.arg for a in method.args.args[1:]]
    sent = [a.id if isinstance(a, ast.Name) else None for a in args]
    sent += [k.value.id if isinstance(k.value, ast.Name) else None for k in node.keywords]
    return on_self and sent == own


def _yields_each(body: list[ast.stmt], source: ast.expr | None = None) -> bool:
    """``async for item in <source>: yield item``, alone."""
    if len(body) != 1 or not isinstance(body[0], ast.AsyncFor):
        return False
    loop = body[0]
    only = loop.body[0] if len(loop.body) == 1 else None
    yields_item = (
        isinstance(only, ast.Expr)
        and isinstance(only.value, ast.Yield)
        and isinstance(only.value.value, ast.Name)
        and isinstance(loop.target, ast.Name)
        and only.value.value.id == loop.target.id
    )
    if source is None:
        return yields_item
    same_source = isinstance(source, ast.Name) and isinstance(loop.iter, ast.Name)
    return yields_item and same_source and loop.iter.id == source.id  # type: ignore[union-attr]


def is_pass_through(method: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True when the method's body, its docstring aside, only hands the same call with the
    same arguments to a model it holds: return/await it, or yield each of its items."""
    body = list(method.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1:
        return False
    statement = body[0]
    if isinstance(statement, ast.Return | ast.Expr):
        return _same_call(statement.value, method)
    if isinstance(statement, ast.AsyncFor):
        return _same_call(statement.iter, method) and _yields_each(body)
    if isinstance(statement, ast.AsyncWith) and len(statement.items) == 1:
        opened = statement.items[0]
        held = opened.context_expr
        inner = held.args[0] if isinstance(held, ast.Call) and len(held.args) == 1 else held
        named = opened.optional_vars
        return _same_call(inner, method) and _yields_each(statement.body, named)
    return False


def copied_attributes(method: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """``self.<member> = <something>.<member>`` in ``__init__``: a copy WrapperModel makes."""
    copied = []
    for node in ast.walk(method):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if (
            isinstance(target, ast.Attribute)
            and isinstance(value, ast.Attribute)
            and target.attr == value.attr
            and target.attr in DATA
        ):
            copied.append(target.attr)
    return copied


@functools.cache
def _classes() -> tuple[tuple[str, ast.ClassDef], ...]:
    """Each class of tooldeck's source, parsed: (its file under src/tooldeck, the class)."""
    return tuple(
        (path.relative_to(SRC).as_posix(), node)
        for path in sorted(SRC.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef)
    )


def _wrapper_classes() -> dict[str, tuple[str, ast.ClassDef]]:
    """Each class of tooldeck's source that subclasses WrapperModel: name -> (file, class)."""
    return {
        cls.name: (path, cls) for path, cls in _classes() if any(map(_is_wrapper_base, cls.bases))
    }


def test_the_pass_through_check_finds_the_old_wrappers_copies() -> None:
    """The check below, on what tooldeck's wrappers re-declared before WrapperModel."""
    old = ast.parse(
        "class TracedModel(Model):\n"
        "    def __init__(self, model, spans):\n"
        "        self.name = model.name\n"
        "        self.native_output = model.native_output\n"
        "    async def count_tokens(self, messages):\n"
        "        return await self._model.count_tokens(messages)\n"
        "    async def aclose(self):\n"
        "        '''Close the model.'''\n"
        "        await self.inner.aclose()\n"
        "    async def stream(self, messages, tools, settings, instructions=''):\n"
        "        async with aclosing(self.inner.stream(messages, tools, settings,\n"
        "                                              instructions)) as items:\n"
        "            async for item in items:\n"
        "                yield item\n"
        "    async def complete(self, messages, tools, settings, instructions=''):\n"
        "        return await self.inner.complete(messages, tools, settings, instructions + 'x')\n"
        "    def answer(self, ask):\n"
        "        return answer_of(self.wrapped, ask)\n"
        "    async def stream_answer(self, ask):\n"
        "        async for item in stream_of(self.wrapped, ask):\n"
        "            yield item\n"
        "    async def stream_answer(self, ask):\n"
        "        async for item in stream_of(self.wrapped, replace(ask, tools=())):\n"
        "            yield item\n"
    )
    methods = [n for n in ast.walk(old) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    assert [m.name for m in methods if is_pass_through(m)] == [
        "count_tokens",
        "aclose",
        "stream",
        "answer",
        "stream_answer",
    ]
    assert copied_attributes(methods[0]) == ["name", "native_output"]


def test_tooldeck_has_one_wrapper_model_and_its_wrappers_subclass_it() -> None:
    found = _wrapper_classes()

    assert len(found) >= 4, f"WrapperModel subclasses in tooldeck's source: {sorted(found)}"
    expected = {
        "FallbackModel",
        "RetryingModel",
        "TracedModel",
        "DurableModel",
        "PromptedFallback",
        "ForcedCallHint",
    }
    assert expected <= set(found), f"not WrapperModel subclasses: {expected - set(found)}"
    classes = [cls.name for _, cls in _classes()]
    assert classes.count("WrapperModel") == 1


def test_no_wrapper_re_declares_a_pass_through() -> None:
    redeclared = []
    for name, (path, cls) in sorted(_wrapper_classes().items()):
        for method in cls.body:
            if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if is_pass_through(method):
                redeclared.append(f"{path}: {name}.{method.name}")
            if method.name == "__init__":
                copied = copied_attributes(method)
                redeclared += [f"{path}: {name}.__init__ copies {a}" for a in copied]
    assert redeclared == [], "WrapperModel already passes these through"


def _takes_a_model(cls: ast.ClassDef) -> bool:
    """True when the class's ``__init__`` has a parameter annotated ``Model``."""
    for method in cls.body:
        if isinstance(method, ast.FunctionDef) and method.name == "__init__":
            annotations = [a.annotation for a in method.args.args + method.args.kwonlyargs]
            annotations.append(method.args.vararg.annotation if method.args.vararg else None)
            return any(isinstance(a, ast.Name) and a.id == "Model" for a in annotations)
    return False


def test_no_other_model_in_tooldeck_hand_writes_a_pass_through() -> None:
    """A model around a model (one built with a Model) that is not a WrapperModel would
    re-declare the pass-throughs again."""
    hand_written = []
    for path, cls in _classes():
        if cls.name == "WrapperModel" or not _takes_a_model(cls):
            continue
        methods = [m for m in cls.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]
        where = f"{path}: {cls.name}"
        hand_written += [f"{where}.{m.name}" for m in methods if is_pass_through(m)]
        for method in methods:
            if method.name == "__init__":
                hand_written += [f"{where} copies {a}" for a in copied_attributes(method)]
    assert hand_written == []


# --- the request's four arguments: declared once, packed once ---------------------------

REQUEST = ["messages", "tools", "settings", "instructions"]


def test_only_model_and_ask_model_declare_the_request_as_four_arguments() -> None:
    """Users write models against ``Model.complete/stream(messages, tools, settings,
    instructions)``; tooldeck's own models take the request as one ``Ask`` (``AskModel``
    packs it), so no other class of the library declares those four parameters."""
    declared = sorted(
        f"{path}: {cls.name}.{method.name}"
        for path, cls in _classes()
        for method in cls.body
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef)
        and [a.arg for a in method.args.args[1:5]] == REQUEST
    )

    assert declared == [
        "models/base.py: AskModel.complete",
        "models/base.py: AskModel.stream",
        "models/base.py: Model.complete",
        "models/base.py: Model.stream",
    ]


@pytest.fixture
def asks(monkeypatch: pytest.MonkeyPatch) -> list[Ask]:
    """Every ``Ask`` packed from here on."""
    packed: list[Ask] = []

    class CountedAsk(Ask):
        __slots__ = ()

        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            packed.append(self)

    monkeypatch.setattr(base, "Ask", CountedAsk)
    return packed


def _stacked(inner: Model) -> Model:
    """tooldeck's wrappers that need no run around them, one around the next."""
    return RetryingModel(
        FallbackModel(PromptedFallback(ForcedCallHint(inner), {"type": "object"}), inner)
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_a_request_through_tooldecks_wrappers_is_packed_into_one_ask(
    asks: list[Ask], streamed: bool
) -> None:
    inner = ScriptedModel([AssistantOutput(content="hi")])
    model = _stacked(inner)
    settings = ModelSettings(temperature=0.5)

    if streamed:
        items = [item async for item in model.stream([], [], settings, "Be brief.")]
        output = items[-1]
    else:
        output = await model.complete([], [], settings, "Be brief.")

    assert isinstance(output, AssistantOutput)
    assert output.content == "hi"
    assert len(asks) == 1
    assert (asks[0].settings, asks[0].instructions) == (settings, "Be brief.")
    assert inner.requests[0].instructions == "Be brief."


class Recording(Model):
    """A user's model, written against Model's public signature: notes how it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, tuple[Any, ...]]] = []

    async def complete(self, messages, tools, settings, instructions=""):
        self.asked.append(("complete", (messages, tools, settings, instructions)))
        return AssistantOutput(content="whole")

    async def stream(self, messages, tools, settings, instructions=""):
        self.asked.append(("stream", (messages, tools, settings, instructions)))
        yield AssistantOutput(content="streamed")


@pytest.mark.parametrize("streamed", [False, True], ids=["complete", "stream"])
async def test_a_users_model_inside_tooldecks_wrappers_is_asked_through_complete_and_stream(
    streamed: bool,
) -> None:
    inner = Recording()
    model = _stacked(inner)
    request = ([], [], ModelSettings(), "Be brief.")

    if streamed:
        output = [item async for item in model.stream(*request)][-1]
    else:
        output = await model.complete(*request)

    assert inner.asked == [("stream" if streamed else "complete", request)]
    assert output.content == ("streamed" if streamed else "whole")  # type: ignore[union-attr]


async def test_a_tooldeck_model_whose_complete_is_overridden_is_asked_through_it() -> None:
    """A subclass of one of tooldeck's models that overrides ``complete`` (as a user's test
    double does) is asked through it from inside a wrapper, and so is its stream."""

    class Down(ScriptedModel):
        async def complete(self, messages, tools, settings, instructions=""):
            raise ModelUnavailable("HTTP 503 from the provider", 503)

    backup = ScriptedModel([AssistantOutput(content="backup"), AssistantOutput(content="again")])
    down = Down([AssistantOutput(content="never")])
    model = FallbackModel(RetryingModel(down, RetryPolicy(max_attempts=2, backoff=0)), backup)

    assert (await model.complete([], [], ModelSettings())).content == "backup"
    streamed = [item async for item in model.stream([], [], ModelSettings())]
    assert streamed[-1].content == "again"  # type: ignore[union-attr]
    assert down.requests == []
