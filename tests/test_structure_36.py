"""Structural checks of issue 36's small moves, read from the code's own syntax trees.

A budget is typed wherever it is declared (no ``Any`` standing in for a class a layer could
not name), and a tool's ``RunContext`` is built in one place, by name, never positionally.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tooldeck"


def trees() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"))


def _names_any(annotation: ast.expr | None) -> bool:
    """Whether the annotation says ``Any`` anywhere (``Any``, ``typing.Any``, ``Any | None``,
    a quoted ``"Any"``)."""
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Any":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _names_any(ast.parse(node.value, mode="eval").body)
        ):
            return True
    return False


def _annotated(tree: ast.Module) -> Iterator[tuple[str, ast.expr | None, int]]:
    """Every annotated name: fields and variables, and the parameters of functions."""
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign):
            target = node.target
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
            yield name, node.annotation, node.lineno
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args
            for argument in [
                *arguments.posonlyargs,
                *arguments.args,
                *arguments.kwonlyargs,
                *([arguments.vararg] if arguments.vararg else []),
                *([arguments.kwarg] if arguments.kwarg else []),
            ]:
                yield argument.arg, argument.annotation, argument.lineno
            if "budget" in node.name:
                yield node.name, node.returns, node.lineno


def test_no_budget_is_typed_any() -> None:
    """``RunContext.budget`` was ``Any`` because tools/ could not name the run's ``Budget``;
    the class now lives below the tools (``tooldeck._budget``)."""
    loose = [
        f"{path.relative_to(SRC)}:{line}: {name}"
        for path, tree in trees()
        for name, annotation, line in _annotated(tree)
        if "budget" in name.lower() and _names_any(annotation)
    ]
    assert loose == []


def test_the_any_check_finds_an_any_typed_budget() -> None:
    tree = ast.parse("class C:\n    budget: 'Any | None' = None\ndef f(budget: Any): ...")
    found = [name for name, annotation, _ in _annotated(tree) if _names_any(annotation)]
    assert found == ["budget", "budget"]


def test_a_tool_can_name_the_budget_it_is_given() -> None:
    from tooldeck import Budget, RunContext
    from tooldeck.run import budget

    assert RunContext.__annotations__["budget"] == "Budget | None"
    assert budget.Budget is Budget
    assert {"Budget", "BudgetLeft", "BudgetSpent", "Counts"} <= set(budget.__all__)


def _builds_run_context(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    made = node.func.value if isinstance(node.func, ast.Subscript) else node.func
    name = made.id if isinstance(made, ast.Name) else getattr(made, "attr", "")
    return name == "RunContext"


def test_run_context_is_built_in_one_place_by_name() -> None:
    """Five places built it, two of them copies of each other, twelve fields by position:
    now ``run_context`` builds every one, its callers naming each field."""
    built = [
        (path.relative_to(SRC).as_posix(), node)
        for path, tree in trees()
        for node in ast.walk(tree)
        if _builds_run_context(node)
    ]
    assert [place for place, _ in built] == ["run/_engine/contexts.py"]


def test_the_one_place_passes_each_field_its_own_parameter() -> None:
    """``run_context``'s parameters are RunContext's fields in their order; inside, it calls
    the class positionally (a class called with keywords costs a dict a call), so each
    argument must be the parameter named as the field in its place."""
    import dataclasses
    import inspect

    from tooldeck.run._engine.contexts import run_context
    from tooldeck.tools.context import RunContext

    fields = [field.name for field in dataclasses.fields(RunContext)]
    parameters = inspect.signature(run_context).parameters.values()
    assert [p.name for p in parameters] == fields  # a positional call is the field order
    tree = ast.parse((SRC / "run" / "_engine" / "contexts.py").read_text(encoding="utf-8"))
    (call,) = [node for node in ast.walk(tree) if _builds_run_context(node)]
    assert isinstance(call, ast.Call)
    assert call.keywords == []
    assert [arg.id if isinstance(arg, ast.Name) else None for arg in call.args] == fields


def test_the_one_place_check_sees_every_way_of_building_it() -> None:
    tree = ast.parse("RunContext('a', 'b', None)\nRunContext[int](x=1)\ncontext.RunContext()")
    assert sum(_builds_run_context(node) for node in ast.walk(tree)) == 3


def test_only_the_per_call_context_passes_the_fields_by_position() -> None:
    """Every other caller of ``run_context`` names each field it gives."""
    positional = [
        path.relative_to(SRC).as_posix()
        for path, tree in trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "run_context"
        and node.args
    ]
    assert positional == ["run/_engine/calls/shared.py"]
