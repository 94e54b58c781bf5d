"""Sessions shared by real processes, on SQLite and PostgreSQL: racing runs never interleave
or lose a turn, a pause is resumed by exactly one process, and a process killed with SIGKILL
(in a tool, or inside the database write) leaves its last committed turn, and its own
prompt and rounds in its journal, which the next run closes into the conversation.

The children are tests/_session_child.py, started with subprocess; they meet at a barrier
of files so that they really overlap."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from _stores import Store
from helpers import answer, call, calls
from tooldeck import Agent, Message, ScriptedModel, tool
from tooldeck.run._engine.recovery import NO_REPORT
from tooldeck.run.events import FinalAnswer, RunRecovered

CHILD = Path(__file__).with_name("_session_child.py")


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def start(store: Store, workdir: Path, scenario: str, name: str = "child") -> subprocess.Popen[str]:
    command = [sys.executable, str(CHILD), *store.args(), "chat", str(workdir), scenario, name]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def outcome(child: subprocess.Popen[str]) -> dict[str, str]:
    out, err = child.communicate(timeout=180)
    assert child.returncode == 0, err[-3000:]
    result: dict[str, str] = json.loads(out.strip().splitlines()[-1])
    return result


def wait_for(path: Path, children: list[subprocess.Popen[str]], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        for child in children:
            if child.poll() is not None:
                raise AssertionError(f"a child ended early: {child.communicate()[1][-3000:]}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


def release(workdir: Path, children: list[subprocess.Popen[str]], names: list[str]) -> None:
    """Wait until every child is at the barrier, then let them all go at once."""
    for name in names:
        wait_for(workdir / f"ready-{name}", children)
    (workdir / "go").touch()


def kill(child: subprocess.Popen[str]) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL


async def test_racing_runs_one_commits_the_others_get_a_conflict(
    store: Store, tmp_path: Path
) -> None:
    names = ["a", "b"]
    children = [start(store, tmp_path, "race", name) for name in names]
    release(tmp_path, children, names)
    outcomes = {name: outcome(child) for name, child in zip(names, children, strict=True)}

    winners = [name for name, seen in outcomes.items() if seen["outcome"] == "committed"]
    assert len(winners) == 1, outcomes
    for name, seen in outcomes.items():  # a loser is refused before it asks anything, or
        # (when both loaded the session before either opened its run) its finished run is
        # on its SessionConflict
        assert seen["answer"] in (f"answer of {name}", "(no result)")
    history = await store.session().load()
    assert [m.content for m in history.messages if m.role == "user"] == [f"prompt of {winners[0]}"]
    assert history.head == 1


async def test_runs_that_retry_after_a_conflict_lose_no_turn_and_never_interleave(
    store: Store, tmp_path: Path
) -> None:
    names = ["a", "b", "c"]
    children = [start(store, tmp_path, "retry", name) for name in names]
    for child in children:
        assert outcome(child)["outcome"] == "done"

    history = await store.session().load()
    assert history.head == 9
    turns = [history.messages[i : i + 4] for i in range(0, len(history.messages), 4)]
    for turn in turns:  # each turn is whole and one child's: prompt, call, result, answer
        prompt = turn[0].content.removeprefix("prompt ")
        assert [m.role for m in turn] == ["user", "assistant", "tool", "assistant"]
        assert turn[2].content == "stepped"
        assert turn[3].content == f"answer {prompt}"
    order = [turn[0].content.removeprefix("prompt ") for turn in turns]
    assert sorted(order) == sorted(f"{name}-{i}" for name in names for i in range(3))
    for name in names:  # each child's turns in the order it ran them
        assert [o for o in order if o.startswith(name)] == [f"{name}-{i}" for i in range(3)]


async def test_a_pause_is_resumed_by_exactly_one_of_racing_processes(
    store: Store, tmp_path: Path
) -> None:
    session = store.session()
    model = ScriptedModel([calls(call("delete_file", "d1", path="a.txt"))])
    await Agent(model, [delete_file]).run("delete a.txt", session=session)
    names = ["a", "b", "c"]

    children = [start(store, tmp_path, "resume", name) for name in names]
    release(tmp_path, children, names)
    outcomes = [outcome(child) for child in children]

    assert Counter(seen["outcome"] for seen in outcomes) == {"resumed": 1, "refused": 2}
    assert len((tmp_path / "executed").read_text().splitlines()) == 1  # the call ran once
    for seen in outcomes:
        if seen["outcome"] == "refused":
            assert "was already resumed" in seen["message"] or "no paused run" in seen["message"]
    history = await session.load()
    assert [m.role for m in history.messages] == ["user", "assistant", "tool", "assistant"]
    assert history.pending is None


async def committed_turn(store: Store) -> tuple[Message, ...]:
    """A session with one committed turn (the state a killed run must leave)."""
    session = store.session()
    await Agent(ScriptedModel([answer("kept")])).run("the committed turn", session=session)
    return (await session.load()).messages


async def assert_killed_run_is_closed_by_the_next(
    store: Store, before: tuple[Message, ...], kept: list[str], settled: list[str]
) -> None:
    """The session still holds its committed turn alone; the next run, by anyone, at once
    (no lock or half transaction was left behind), closes the killed run as it stood: its
    prompt and what it did (``kept``), its calls that never reported answered (``settled``)."""
    history = await store.session().load()
    assert history.messages == before
    assert history.head == 1
    assert history.unfinished is not None  # the killed run's journal
    agent = Agent(ScriptedModel([answer("after")]))
    events = [event async for event in agent.stream("next", session=store.session())]
    recovered = events[0]
    assert isinstance(recovered, RunRecovered)
    assert recovered.how == "closed"
    assert [trace.result.output for trace in recovered.settled] == settled
    after = events[-1]
    assert isinstance(after, FinalAnswer)
    contents = [message.content for message in after.result.messages]
    assert contents == [*(m.content for m in before), *kept, "next", "after"]
    assert (await store.session().load()).messages == after.result.messages
    assert (await store.session().load()).head == 3  # the closed run, then this one


async def test_a_process_killed_in_a_tool_keeps_its_prompt_and_the_next_run_closes_it(
    store: Store, tmp_path: Path
) -> None:
    before = await committed_turn(store)
    child = start(store, tmp_path, "hang-in-tool")
    wait_for(tmp_path / "in-tool", [child])
    kill(child)
    interrupted = f"error[interrupted]: {NO_REPORT}"
    kept = ["this run is killed in its tool", "", interrupted]
    await assert_killed_run_is_closed_by_the_next(store, before, kept, [interrupted])


async def test_a_process_killed_inside_its_database_write_leaves_no_half_turn(
    store: Store, tmp_path: Path
) -> None:
    before = await committed_turn(store)
    child = start(store, tmp_path, "hang-in-write")
    wait_for(tmp_path / "in-write", [child])
    kill(child)
    # the answer was never stored (the commit was killed): the prompt is kept, unanswered
    await assert_killed_run_is_closed_by_the_next(store, before, ["killed in its commit"], [])


async def test_processes_killed_at_random_moments_of_large_writes_leave_whole_turns(
    store: Store, tmp_path: Path
) -> None:
    rng = random.Random(10)
    for attempt in range(2):
        marker = tmp_path / "wrote-one"
        marker.unlink(missing_ok=True)
        child = start(store, tmp_path, "big-writes")
        wait_for(marker, [child])
        time.sleep(rng.uniform(0.0, 0.3))
        kill(child)
        history = await store.session().load()
        assert len(history.messages) == 2 * history.head, f"attempt {attempt}"
        for i in range(0, len(history.messages), 2):
            assert history.messages[i].content.startswith("big ")
            assert history.messages[i + 1].content == "x" * 2_000_000
