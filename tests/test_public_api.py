"""The top-level API: a short list by theme, every name real, exceptions in tooldeck.errors."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

import tooldeck
import tooldeck.errors


def test_the_top_level_is_a_short_list_and_every_name_resolves() -> None:
    assert len(tooldeck.__all__) <= 40
    assert len(set(tooldeck.__all__)) == len(tooldeck.__all__)
    for name in tooldeck.__all__:
        value = getattr(tooldeck, name)
        assert getattr(value, "__name__", name) == name, name


def test_only_the_bases_of_the_errors_are_top_level() -> None:
    exported = {n for n in tooldeck.__all__ if isinstance(getattr(tooldeck, n), type)}
    errors = {n for n in exported if issubclass(getattr(tooldeck, n), Exception)}
    assert errors == {"ToolDeckError", "ToolDefinitionError", "RunStopped", "ModelError"}


def test_every_error_class_is_importable_from_tooldeck_errors() -> None:
    classes = {
        name
        for name, value in inspect.getmembers(tooldeck.errors, inspect.isclass)
        if issubclass(value, Exception)
        and not issubclass(value, Warning)
        and value.__module__ == "tooldeck.errors"
    }
    for name in ("LimitExceeded", "ProviderError", "ModelAuthError", "CheckpointError"):
        assert name in classes
    assert all(issubclass(getattr(tooldeck.errors, n), tooldeck.ToolDeckError) for n in classes)


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("LimitExceeded", "tooldeck.errors"),
        ("ToolView", "tooldeck.tools.registry"),
        ("RecordedRequest", "tooldeck.models.scripted"),
        ("resolve_model", "tooldeck.models.resolve"),
        ("SQLiteSession", "tooldeck.sessions"),
        ("SessionConflict", "tooldeck.errors or tooldeck.sessions"),
        ("RunLogError", "tooldeck.runlog or tooldeck.errors"),
        ("CaseFileError", "tooldeck.eval"),
        ("KeepLastExchanges", "tooldeck.run.history"),
        ("RunLog", "tooldeck.runlog"),
        ("DurableAgent", "tooldeck.durable"),
        ("MCPToolset", "tooldeck.tools.mcp"),
    ],
)
def test_a_name_that_moved_says_where_it_lives_now(name: str, where: str) -> None:
    with pytest.raises(AttributeError) as raised:
        getattr(tooldeck, name)
    assert str(raised.value) == (
        f"module 'tooldeck' has no attribute {name!r}; import it from {where}"
    )
    for home in where.split(" or "):
        assert hasattr(__import__(home, fromlist=[name]), name)


def _public_modules() -> Iterator[ModuleType]:
    """Every module of tooldeck a program imports by name: none with a private part, and
    not the command line's or the web app's own (their errors never reach a program)."""
    for found in pkgutil.walk_packages(tooldeck.__path__, "tooldeck."):
        parts = found.name.split(".")
        if any(part.startswith("_") for part in parts) or parts[1] in ("cli", "web"):
            continue
        yield importlib.import_module(found.name)


def _public_errors() -> dict[str, set[str]]:
    """Each public error class (and warning) by name, with the modules that offer it: a
    module's ``__all__`` names it, or it is a ToolDeckError the module defines."""
    errors: dict[str, set[str]] = {}
    for module in [tooldeck.errors, *_public_modules()]:
        offered = getattr(module, "__all__", None)
        for name, value in vars(module).items():
            if not (isinstance(value, type) and issubclass(value, BaseException | Warning)):
                continue
            if name.startswith("_") or not value.__module__.startswith("tooldeck"):
                continue
            defined_here = value.__module__ == module.__name__
            if (offered is not None and name in offered) or (
                defined_here and issubclass(value, tooldeck.ToolDeckError | Warning)
            ):
                errors.setdefault(name, set()).add(module.__name__)
    return errors


def test_every_public_error_asked_of_tooldeck_is_there_or_says_where() -> None:
    errors = _public_errors()
    assert {"RunLogError", "CaseFileError", "MCPConnectionError", "UnscriptedRequests"} <= set(
        errors
    )
    for name, modules in sorted(errors.items()):
        if name in tooldeck.__all__:
            continue
        with pytest.raises(AttributeError) as raised:
            getattr(tooldeck, name)
        said = str(raised.value)
        assert said.startswith(f"module 'tooldeck' has no attribute {name!r}; import it from "), (
            f"tooldeck.{name} does not say where it lives (it is in {sorted(modules)}): {said!r}"
        )
        homes = said.split("; import it from ", 1)[1].split(" or ")
        for home in homes:  # each place named really holds that very class
            held = getattr(importlib.import_module(home), name)
            assert held is getattr(importlib.import_module(sorted(modules)[0]), name), home


def test_sessions_hold_what_a_conversation_needs_the_run_log_included() -> None:
    import tooldeck.errors
    import tooldeck.runlog
    import tooldeck.sessions

    assert tooldeck.sessions.RunLog is tooldeck.runlog.RunLog  # where DESIGN.md puts it
    assert tooldeck.sessions.SessionConflict is tooldeck.errors.SessionConflict
    assert set(tooldeck.sessions.__all__) >= {"Session", "SQLiteSession", "PostgresSession"}


def test_an_unknown_name_is_a_plain_attribute_error() -> None:
    name = "Nope"
    with pytest.raises(AttributeError, match=r"^module 'tooldeck' has no attribute 'Nope'$"):
        getattr(tooldeck, name)


def test_the_confusable_names_are_gone() -> None:
    for old in (
        "ModelRequest" + "Record",
        "ModelRequest" + "Failed",
    ):  # spelled apart: a search finds none left
        assert old not in dir(tooldeck)
        assert not hasattr(tooldeck.errors, old)


def test_importing_tooldeck_loads_neither_pydantic_nor_asyncio() -> None:
    code = "import sys, tooldeck; print('pydantic' in sys.modules, 'asyncio' in sys.modules)"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert shown.stdout.split() == ["False", "False"], shown.stderr


@pytest.mark.parametrize(
    ("old", "new", "name"),
    [
        ("tooldeck.loop", "tooldeck.run.agent", "Agent"),
        ("tooldeck.contracts", "tooldeck.messages", "ToolCall"),
        ("tooldeck.contracts", "tooldeck.results", "RunResult"),
        ("tooldeck.policy", "tooldeck.run.policy", "Limits"),
        ("tooldeck.checkpoint", "tooldeck.run._engine.checkpoint", "call_digest"),
        ("tooldeck.events", "tooldeck.run.events", "NestedEvent"),
        ("tooldeck.middleware", "tooldeck.run.middleware", "Middleware"),
        ("tooldeck.history", "tooldeck.run.history", "Summarize"),
        ("tooldeck.output", "tooldeck.run.output", "OutputSchema"),
        ("tooldeck.demo", "tooldeck.cli.demo", "demo_agent"),
        ("tooldeck.tools.dialects", "tooldeck.eval.bfcl.dialect", "bfcl_tools"),
    ],
)
def test_an_old_module_path_imports_as_the_one_it_became_with_a_warning(
    old: str, new: str, name: str
) -> None:
    code = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        f"assert getattr(old, {name!r}) is getattr(new, {name!r})\n"
        "print(caught[0].category.__name__, caught[0].message)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"DeprecationWarning {old} moved to ")
    assert new in done.stdout


def test_renamed_names_keep_working_with_a_deprecation_warning() -> None:
    from tooldeck import Agent, ScriptedModel
    from tooldeck.messages import Message
    from tooldeck.run import history
    from tooldeck.sessions import StoredRun

    with pytest.warns(DeprecationWarning, match="KeepLastTurns is now KeepLastExchanges"):
        old = history.KeepLastTurns(2)
    assert isinstance(old, history.KeepLastExchanges)
    assert old.turns == 2
    with pytest.warns(DeprecationWarning, match=r"Agent\(history=...\) is now Agent\(history_s"):
        agent = Agent(ScriptedModel([]), history=old)
    assert agent.history_strategy is old
    with pytest.warns(DeprecationWarning, match="tooldeck.sessions.Turn is now StoredRun"):
        assert tooldeck.sessions.Turn is StoredRun
    with pytest.warns(DeprecationWarning, match="current_turn is now current_exchange"):
        assert history.current_turn([Message.user("a"), Message.user("b")]) == 1


def test_what_sessions_called_a_turn_is_a_stored_run_and_the_old_names_still_work() -> None:
    """A turn is a model's; what a session keeps of a run is a stored run. The stored data
    keeps its names (the log's ``kind`` is still ``'turn'``): only the Python names moved."""
    from tooldeck import sessions
    from tooldeck.sessions import SessionInfo

    with pytest.warns(DeprecationWarning, match="turn_cache is now stored_run_cache"):
        assert sessions.turn_cache is sessions.stored_run_cache
    with pytest.warns(DeprecationWarning, match="TurnCaches is now StoredRunCaches"):
        assert sessions.TurnCaches is sessions.StoredRunCaches
    info = SessionInfo("chat", "Hello", 3, 0.0, 0.0, False)
    with pytest.warns(DeprecationWarning, match=r"SessionInfo.turns is now SessionInfo.runs"):
        assert info.turns == info.runs == 3


def test_a_registry_says_where_its_mcp_server_went() -> None:
    registry = tooldeck.ToolRegistry()
    with pytest.raises(AttributeError, match=r"tooldeck\.serve\.mcp\.mcp_server\(registry"):
        registry.to_mcp_server(name="x")  # type: ignore[attr-defined]


def test_a_module_imported_by_its_old_path_keeps_its_own_spec() -> None:
    """The import system gives the alias's spec to the module it returns; the compat
    loader gives the module back its own, so its file is still found by its real name."""
    code = (
        "import importlib, importlib.util, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "importlib.import_module('tooldeck.run.records')\n"
        "spec = importlib.util.find_spec('tooldeck.run._engine.records')\n"
        "print(spec.name, spec.origin)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    name, origin = done.stdout.split()
    assert name == "tooldeck.run._engine.records"
    assert origin.endswith("run/_engine/records.py")
