"""Running cases on models: ``run_eval`` and one case through ``tooldeck.Agent``.

A case scored on its first turn runs with ``max_rounds=1``: the first turn's calls are
validated and run against stub handlers, then the run stops (``LimitExceeded``), and the
turn is judged. A case with an answer check or a typed output runs to its end with the real
tools. Settings are those of BFCL's evaluation: temperature 0, the tool choice given
(``"auto"``), parallel calls asked for where the case says so (BFCL's ``parallel*``), and a
token budget per turn.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from tooldeck.code import RUN_CODE, CodeMode
from tooldeck.errors import LimitExceeded, RunStopped
from tooldeck.eval.bfcl.many import SEARCHES, check_context
from tooldeck.eval.cases import EvalCase, ExpectOutput
from tooldeck.eval.judge import (
    expected_shown,
    first_calls,
    judge_first_turn,
    judge_run_end,
    made_calls,
    scored_turn,
)
from tooldeck.eval.report import EvalReport
from tooldeck.eval.results import CaseResult
from tooldeck.messages import Message, Usage
from tooldeck.models.base import Model, ModelSettings
from tooldeck.models.prices import ModelPrices, price_of
from tooldeck.models.resolve import resolve_model
from tooldeck.results import RunResult
from tooldeck.run.agent import Agent
from tooldeck.run.capabilities import Approvals, Capability
from tooldeck.run.policy import Limits
from tooldeck.search import SEARCH_TOOL, ToolSearch

ParallelMode = Literal["case", "model", "on", "off"]
Scorer = Callable[[EvalCase, CaseResult], float | bool]
"""A user's scorer: the case and its scored result in, 0 to 1 (or a bool) out."""
ModelsLike = Model | str | Sequence[Model | str] | Mapping[str, Model | str]


@dataclass(frozen=True, slots=True)
class EvalSettings:
    """How each case is asked (the same for every model)."""

    tool_choice: str = "auto"
    """``auto``, ``required``, ``none`` or a tool's name."""
    max_tokens: int | None = 1024
    """Tokens per turn (enough that the budget does not cut a call short)."""
    temperature: float = 0.0
    parallel: ParallelMode = "case"
    """``case``: parallel calls where the case asks for them (BFCL's ``parallel*``), the
    model's default elsewhere; ``model``: always the default; ``on``/``off``: always."""
    max_rounds: int = 8
    """Rounds a whole run may take (cases with an answer check or a typed output)."""
    timeout_s: float | None = None
    """Seconds a case may take; a case that takes longer is wrong, its error says why
    (a server that generates without end cannot hold up the evaluation)."""

    def parallel_for(self, case: EvalCase) -> bool | None:
        """``ModelSettings.parallel_tool_calls`` for ``case``."""
        if self.parallel == "case":
            return case.parallel
        return {"model": None, "on": True, "off": False}[self.parallel]


@dataclass(frozen=True, slots=True)
class Contestant:
    """A model under evaluation and the name its results carry."""

    model: Model
    name: str
    priced: bool = True
    """Whether to look its prices up (not for a local server that borrows a model's name)."""
    prices: ModelPrices | None = None
    """Its own prices (``tooldeck eval --price``), used instead of a looked-up one."""


async def run_eval(
    cases: Iterable[EvalCase],
    model: ModelsLike | Sequence[Contestant],
    settings: EvalSettings | None = None,
    *,
    jobs: int = 1,
    scorers: Sequence[Scorer] = (),
    done: Iterable[CaseResult] = (),
    on_result: Callable[[CaseResult], None] | None = None,
) -> EvalReport:
    """Run every case on every model and score it; one report for all of them.

    Args:
        cases: The cases (``tooldeck.eval.bfcl.bfcl_suite``, ``load_case_file``, or made).
        model: A model or model string, several of them, a mapping name -> model, or
            ``Contestant`` records. Models named by a string are closed at the end.
        settings: How each case is asked (``EvalSettings()``: BFCL's settings).
        jobs: Cases run at once per model (a local model runs one at a time whatever this
            says: it has one context).
        scorers: Functions ``(case, result) -> float | bool``, each a column of the report.
        done: Results already scored (a stored run being resumed): their cases are skipped,
            and they are part of the report.
        on_result: Called with each result as it is scored (a progress display).

    Raises:
        ValueError: A case shows more tools than a model's stated context can hold
            (``bfcl:many_tools`` with ``all`` on a local model); nothing was run.
    """
    chosen = list(cases)
    contestants = _contestants(model)
    kept = list(done)
    have = {result.key for result in kept}
    try:
        check_context(chosen, [contestant.model for contestant in contestants])
        for contestant in contestants:
            todo = [c for c in chosen if (contestant.name, *c.key) not in have]
            kept.extend(
                await _run_model(
                    contestant, todo, settings or EvalSettings(), jobs, scorers, on_result
                )
            )
    finally:
        for contestant, given in zip(contestants, _given(model), strict=False):
            if isinstance(given, str):
                await contestant.model.aclose()
    return EvalReport(tuple(kept))


async def _run_model(
    contestant: Contestant,
    cases: Sequence[EvalCase],
    settings: EvalSettings,
    jobs: int,
    scorers: Sequence[Scorer],
    on_result: Callable[[CaseResult], None] | None,
) -> list[CaseResult]:
    gate = asyncio.Semaphore(1 if _is_local(contestant.model) else max(1, jobs))

    async def one(case: EvalCase) -> CaseResult:
        async with gate:
            result = await run_case(contestant, case, settings)
        result = _with_scores(case, result, scorers)
        if on_result is not None:
            on_result(result)
        return result

    return list(await asyncio.gather(*(one(case) for case in cases)))


async def run_case(contestant: Contestant, case: EvalCase, settings: EvalSettings) -> CaseResult:
    """One case on one model, scored."""
    history = case.messages[:-1]
    agent = _agent(contestant.model, case, settings)
    started = time.perf_counter()
    error = ""
    result: RunResult[Any] | None
    try:
        result = await agent.run(case.messages[-1].content, history=list(history))
    except LimitExceeded as stopped:
        result = stopped.result
        if stopped.limit != "max_rounds" or not case.first_turn_only:
            error = f"{type(stopped).__name__}: {stopped}"
        # else the model called tools: the first turn is all we want
    except RunStopped as failed:
        error = f"{type(failed).__name__}: {failed}"
        result = failed.result
    seconds = time.perf_counter() - started
    turn = result.messages[len(history) + 1 :] if result is not None else ()
    first, text = first_calls(turn, SEARCH_TOOL if case.tool_search else None)
    if case.tool_search and result is not None and not error:
        error = _unrevealed(case, turn, result)
    if case.first_turn_only:
        judged = judge_first_turn(case, first, error)
        signals = _signals(contestant.model)
    else:
        answer = result.answer if result is not None and not error else ""
        output = result.output if result is not None and not error else None
        judged = judge_run_end(case, made_calls(turn), answer, output, error)
        if case.code_mode and result is not None:  # run_code is not one of the case's tools
            judged = replace(judged, valid_calls=_accepted(result))
        text, signals = answer, {}
    usage = result.usage if result is not None else None
    return CaseResult(
        model=contestant.name,
        suite=case.suite,
        id=case.id,
        category=case.category,
        correct=judged.correct,
        reason=judged.reason,
        expected_call=case.expects_call,
        made_call=bool(first),
        calls=len(judged.made),
        valid_calls=judged.valid_calls,
        seconds=seconds,
        strict=judged.strict,
        input_tokens=usage.input_tokens if usage and usage.requests else None,
        output_tokens=usage.output_tokens if usage and usage.requests else None,
        requests=usage.requests if usage else None,
        tool_calls=tool_calls(result),
        cost=_cost(contestant, usage),
        expected=expected_shown(case),
        made=judged.made,
        text=text,
        error=error,
        signals=signals,
    )


def _agent(model: Model, case: EvalCase, settings: EvalSettings) -> Agent[None]:
    model_settings = ModelSettings(
        tool_choice=settings.tool_choice,
        parallel_tool_calls=settings.parallel_for(case),
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
    )
    if case.first_turn_only:
        limits = Limits(
            max_rounds=SEARCHES + 1 if case.tool_search else 1,
            repeat_limit=None,
            tool_retries=100,
            max_duration_s=settings.timeout_s,
        )
        return Agent(
            model,
            list(case.tools),
            instructions=case.instructions,
            settings=model_settings,
            limits=limits,
            capabilities=_searching() if case.tool_search else (),
        )
    output_type = case.expect.output_type if isinstance(case.expect, ExpectOutput) else None
    return Agent(
        model,
        list(case.tools),
        instructions=case.instructions,
        settings=replace(model_settings, tool_choice="auto"),
        limits=Limits(max_rounds=settings.max_rounds, max_duration_s=settings.timeout_s),
        output_type=output_type,
        capabilities=_coding() if case.code_mode else (),
    )


def _coding() -> list[Capability]:
    """A case asked in code mode: its tools behind ``run_code`` (pydantic-monty is imported
    only when a program runs)."""
    return [CodeMode()]


def tool_calls(result: RunResult[Any] | None) -> int | None:
    """Calls of the case's tools the run answered: each call a program made counted, the
    program's own ``run_code`` not (None: the run left no result)."""
    if result is None:
        return None
    return sum(
        len(trace.inner_trace or ()) if trace.call.name == RUN_CODE else 1
        for trace in result.tool_trace
    )


_NOT_ACCEPTED = ("unknown_tool", "invalid_json", "invalid_arguments")


def _accepted(result: RunResult[Any]) -> int:
    """The model's calls the run took as calls of a tool it offers, with arguments its
    schema accepts (in code mode: ``run_code``, and a hidden tool called directly is not)."""
    return sum(trace.result.error_code not in _NOT_ACCEPTED for trace in result.tool_trace)


def _unrevealed(case: EvalCase, turn: Sequence[Message], result: RunResult[Any]) -> str:
    """Why the scored turn of a searching case is wrong whatever its calls: it called one of
    the registry's tools before a search revealed it (the call was refused, unknown)."""
    scored = scored_turn(turn, SEARCH_TOOL)
    ids = {call.id for call in scored.tool_calls} if scored is not None else set()
    for trace in result.tool_trace:
        if (
            trace.call.id in ids
            and trace.result.error_code == "unknown_tool"
            and trace.call.name in case.names
        ):
            return f"called {trace.call.name!r} before a search revealed it (unknown_tool)"
    return ""


def _searching() -> list[Capability]:
    """A case whose tools are found by search: ``ToolSearch``, and the calls of every other
    tool wait (as for an approval), so the run stops with the turn that is scored."""
    return [ToolSearch(), Approvals(lambda entry: entry.name != SEARCH_TOOL)]


def _with_scores(case: EvalCase, result: CaseResult, scorers: Sequence[Scorer]) -> CaseResult:
    if not scorers:
        return result
    scores = {_scorer_name(s): float(s(case, result)) for s in scorers}
    return replace(result, scores=scores)


def _scorer_name(scorer: Scorer) -> str:
    name: str = getattr(scorer, "__name__", type(scorer).__name__)
    return name


def _cost(contestant: Contestant, usage: Usage | None) -> float | None:
    if usage is None or not usage.requests:
        return None
    if contestant.prices is not None:
        return contestant.prices.cost(usage)
    return price_of(contestant.name, usage) if contestant.priced else None


def _signals(model: Model) -> dict[str, float]:
    """A local model's decision measures for the turn it just wrote."""
    if "tooldeck.models.local" not in sys.modules:  # no local model was made
        return {}
    from tooldeck.models.local import LocalModel

    if not isinstance(model, LocalModel) or model.last_turn is None:
        return {}
    turn = model.last_turn
    found = {"fit": turn.fit, "call_score": turn.call_score}
    return {name: value for name, value in found.items() if value is not None}


def _is_local(model: Model) -> bool:
    if "tooldeck.models.local" not in sys.modules:
        return False
    from tooldeck.models.local import LocalModel

    return isinstance(model, LocalModel)


def _given(model: ModelsLike | Sequence[Contestant]) -> list[object]:
    if isinstance(model, Model | str):
        return [model]
    if isinstance(model, Mapping):
        return list(model.values())
    return list(model)


def _contestants(model: ModelsLike | Sequence[Contestant]) -> list[Contestant]:
    named: list[tuple[str | None, Any]]
    if isinstance(model, Mapping):
        named = list(model.items())
    else:
        named = [(None, given) for given in _given(model)]
    made: list[Contestant] = []
    for name, given in named:
        if isinstance(given, Contestant):
            made.append(given)
            continue
        resolved = resolve_model(given)
        made.append(
            Contestant(resolved, name or (given if isinstance(given, str) else resolved.name))
        )
    return _unique(made)


def _unique(contestants: list[Contestant]) -> list[Contestant]:
    """Names made unique with ``#2``, ``#3`` (two models with one name would mix results)."""
    seen: dict[str, int] = {}
    unique = []
    for contestant in contestants:
        count = seen[contestant.name] = seen.get(contestant.name, 0) + 1
        unique.append(
            contestant if count == 1 else replace(contestant, name=f"{contestant.name}#{count}")
        )
    return unique
