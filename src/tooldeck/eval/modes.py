"""How a suite's cases are asked (``--tools``): as they are (``own``) or in code mode (``code``).

``code`` shows a case's tools behind ``tooldeck.code.CodeMode``: the model is offered one
``run_code`` tool and calls the case's tools from a Python program (run in pydantic-monty,
the ``code`` extra). It applies to a case run to its end and checked by its answer or typed
output; a case scored on its first turn's calls (BFCL's) cannot be asked that way. Several
modes run at once (``own,code``): a case's id and category name its mode, ``code/ada_spent``
in ``code/chained``. ``bfcl:many_tools`` has modes of its own (``tooldeck.eval.bfcl.many``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import replace

from tooldeck.eval.cases import EvalCase

CASE_MODES = ("own", "code")
"""A case as it is (its tools called one by one), or its tools behind ``run_code``."""


def parse_case_modes(tools: str | Sequence[str], suite: str) -> tuple[str, ...]:
    """``"own,code"`` or a list of modes -> the modes, checked.

    Raises:
        ValueError: A mode that is not one of ``CASE_MODES`` (the message lists them).
    """
    given = tools.split(",") if isinstance(tools, str) else list(tools)
    modes = tuple(dict.fromkeys(mode.strip() for mode in given if mode.strip()))
    if not modes or any(mode not in CASE_MODES for mode in modes):
        raise ValueError(
            f"{suite} --tools {','.join(given)!r}: a mode is one of {', '.join(CASE_MODES)} "
            "(several comma-separated, e.g. own,code)"
        )
    return modes


def in_modes(cases: Sequence[EvalCase], suite: str, tools: str | Sequence[str]) -> list[EvalCase]:
    """Each case asked in each mode of ``tools``, case by case (a run cut short has each
    case it reached in every mode).

    Raises:
        ValueError: A mode that is not one of ``CASE_MODES``, or ``code`` for a case scored
            on its first turn (the message names the case).
        ImportError: ``code`` without pydantic-monty (the message says what to install).
    """
    modes = parse_case_modes(tools, suite)
    if "code" in modes:
        check_code_mode(cases, suite)
    return [_asked(case, mode) for case in cases for mode in modes]


def check_code_mode(cases: Sequence[EvalCase], suite: str) -> None:
    """Refuse code mode where it cannot run: a case scored on its first turn, or no
    pydantic-monty installed.

    Raises:
        ValueError: The first case scored on its first turn's calls.
        ImportError: pydantic-monty is not installed.
    """
    first_turn = next((case for case in cases if case.first_turn_only), None)
    if first_turn is not None:
        raise ValueError(
            f"--tools code: {suite}'s case {first_turn.id!r} is scored on its first turn's "
            "calls, and code mode needs a case run to its end, checked by its answer or "
            "typed output (tasks:chained, or a case file's answer: or output:)"
        )
    if importlib.util.find_spec("pydantic_monty") is None:
        raise ImportError(
            "--tools code runs the model's programs in pydantic-monty, which is not "
            "installed: pip install 'tooldeck[code]'"
        )


def _asked(case: EvalCase, mode: str) -> EvalCase:
    return replace(
        case,
        id=f"{mode}/{case.id}",
        category=f"{mode}/{case.category}",
        code_mode=mode == "code",
    )
