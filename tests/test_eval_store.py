"""Stored eval results: written as cases finish, read back strictly (a bad line is named), used
to resume a run and to compare runs; and what a case costs, from genai-prices."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tooldeck import AssistantOutput, Message, ModelSettings, ToolSpec
from tooldeck.eval import (
    CaseResult,
    EvalReport,
    EvalSettings,
    ResultFileError,
    ResultWriter,
    bfcl_suite,
    read_results,
    run_eval,
)
from tooldeck.messages import Usage
from tooldeck.models.base import Model
from tooldeck.models.prices import price_of

SETTINGS = {"tool_choice": "auto", "max_tokens": 1024}


def result(case_id: str, correct: bool = True, model: str = "m") -> CaseResult:
    return CaseResult(
        model, "bfcl:irrelevance", case_id, "irrelevance", correct, "", False, False, 0, 0, 1.5
    )


def test_results_round_trip_through_the_file(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    writer = ResultWriter(path, SETTINGS, resume=False)
    writer.add(result("a"))
    writer.add(result("b", correct=False))
    writer.close()
    stored = read_results(path)
    assert [r.id for r in stored.results] == ["a", "b"]
    assert stored.results[1] == result("b", correct=False)
    assert stored.headers[0]["settings"] == SETTINGS
    with pytest.raises(ResultFileError, match="exists: resume it"):
        ResultWriter(path, SETTINGS, resume=False)
    again = ResultWriter(path, SETTINGS, resume=True)  # appends a second run's header
    again.add(result("c"))
    again.close()
    assert [r.id for r in read_results(path).results] == ["a", "b", "c"]
    assert len(read_results(path).headers) == 2


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a"}'], "line 1: not a tooldeck eval result file"),
        (["HEADER", "[1, 2]"], "line 2: expected a JSON object"),
        (["HEADER", "{broken"], "line 2: not JSON"),
        (["HEADER", '{"model": "m"}'], "line 2: suite: Field required"),
        (
            ["HEADER", "", "RESULT", '{"format": "tooldeck-eval", "version": 9}'],
            "line 4: version 9",
        ),
        (["HEADER", "RESULT_BAD_TYPE"], "line 2: correct: Input should be a valid boolean"),
        (["HEADER", "RESULT_EXTRA"], "line 2: surprise: Extra inputs are not permitted"),
    ],
)
def test_a_broken_result_file_names_its_line(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    good = result("a").to_json()
    known = {
        "HEADER": json.dumps({"format": "tooldeck-eval", "version": 1, "settings": SETTINGS}),
        "RESULT": json.dumps(good),
        "RESULT_BAD_TYPE": json.dumps({**good, "correct": "yes"}),
        "RESULT_EXTRA": json.dumps({**good, "surprise": 1}),
    }
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(known.get(line, line) for line in lines) + "\n", encoding="utf-8")
    with pytest.raises(ResultFileError) as raised:
        read_results(path)
    assert str(raised.value).startswith(f"{path}, line")
    assert message in str(raised.value)


class GatedModel(Model):
    """Answers every turn in text; the first turns wait until ``together`` of them run."""

    name = "gated"

    def __init__(self, together: int = 1) -> None:
        self.together = together
        self.gate = asyncio.Event()
        self.running = 0
        self.most = 0
        self.turns = 0

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        settings: ModelSettings,
        instructions: str = "",
    ) -> AssistantOutput:
        self.running += 1
        self.turns += 1
        self.most = max(self.most, self.running)
        if self.running >= self.together:
            self.gate.set()
        await self.gate.wait()
        self.running -= 1
        return AssistantOutput(content="No tool fits.", usage=Usage(input_tokens=10, requests=1))


async def test_jobs_run_cases_at_once_and_done_cases_are_skipped() -> None:
    cases = bfcl_suite("irrelevance", limit=6)
    model = GatedModel(together=3)  # it would wait forever if cases ran one at a time
    report = await asyncio.wait_for(run_eval(cases, model, jobs=3), timeout=60)
    assert model.most == 3
    assert [r.id for r in report.results] == [c.id for c in cases]  # in the cases' order
    assert all(r.correct and r.input_tokens == 10 and r.cost is None for r in report.results)
    again = GatedModel()
    resumed = await run_eval(cases, again, done=report.results[:4])
    assert again.turns == 2
    assert [r.id for r in resumed.results] == [c.id for c in cases]


def test_reports_merge_and_the_last_result_of_a_case_wins() -> None:
    first = EvalReport((result("a", correct=False), result("b")))
    later = EvalReport((result("a"), result("a", model="other")))
    merged = first.merged(later)
    assert [(r.model, r.id, r.correct) for r in merged.results] == [
        ("m", "a", True),
        ("m", "b", True),
        ("other", "a", True),
    ]
    assert merged.models == ["m", "other"]


def test_a_hosted_models_cost_comes_from_genai_prices() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, requests=1)
    cost = price_of("openai:gpt-4.1-mini", usage)
    assert cost is not None
    assert cost > 0
    assert price_of("gpt-4.1-mini", usage) == cost  # a bare name is looked up too
    assert price_of("local:gemma-3-270m-q4_k_m.gguf", usage) is None
    assert price_of("openai-chat:no-such-model-anywhere", usage) is None


async def test_a_case_that_takes_too_long_is_wrong_and_says_why() -> None:
    cases = bfcl_suite("irrelevance", limit=1)  # making no call would be right here
    model = GatedModel(together=2)  # one turn at a time: it never answers
    report = await asyncio.wait_for(run_eval(cases, model, EvalSettings(timeout_s=0.2)), timeout=60)
    (result,) = report.results
    assert (result.correct, result.made_call) == (False, False)
    assert result.error == "LimitExceeded: the run took longer than max_duration_s=0.2"
    assert result.reason == result.error
