"""Long histories: what each request carries of a growing conversation, and what is kept."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

import pytest

from _stores import Store
from helpers import answer, call, calls
from tooldeck import Agent, Approve, Message, ModelError, RunResult, ScriptedModel, tool
from tooldeck.models.base import estimate_tokens
from tooldeck.models.scripted import RecordedRequest
from tooldeck.run.events import Event, FinalAnswer
from tooldeck.run.history import SUMMARY_HEADING, KeepLastExchanges, Summarize, TokenBudget
from tooldeck.run.middleware import Middleware, ModelCall, RequestContext

FILLER = "lorem ipsum dolor sit amet " * 6


@tool
def add_numbers(left: int, right: int) -> int:
    """Add two integers."""
    return left + right


@tool(requires_approval=True)
def double_checked(number: int) -> int:
    """Double a number, after a person approves."""
    return 2 * number


def chatty_model(tool_name: str = "add_numbers") -> ScriptedModel:
    """Calls the tool once per prompt ("Question N: ..."), then answers with the result."""

    def step(request: RecordedRequest) -> object:
        last = request.messages[-1]
        if last.role == "user":
            match = re.match(r"Question (\d+)", last.content)
            assert match is not None, last.content
            number = int(match.group(1))
            arguments = {"left": number, "right": number} if tool_name == "add_numbers" else {}
            if tool_name == "double_checked":
                arguments = {"number": number}
            return calls(call(tool_name, f"c{number}", **arguments))
        return answer(f"The result is {last.content}. {FILLER}")

    return ScriptedModel([step] * 400)  # type: ignore[list-item]


def converse(agent: Agent[None], questions: int, history: Sequence[Message] = ()) -> RunResult:
    result = None
    for number in range(1, questions + 1):
        result = agent.run_sync(f"Question {number}: {FILLER}", history=history)
        history = result.messages
    assert result is not None
    return result


def assert_calls_paired(messages: Sequence[Message]) -> None:
    """Every call answered once, right after its turn; no result without its call."""
    open_calls: list[str] = []
    for message in messages:
        if message.role == "tool":
            assert open_calls, f"result {message.tool_call_id!r} sent without its call"
            assert message.tool_call_id == open_calls.pop(0), messages
        else:
            assert not open_calls, f"calls {open_calls} sent without their results"
            open_calls = [c.id for c in message.tool_calls]
    assert not open_calls


def user_turns(messages: Sequence[Message]) -> list[str]:
    return [m.content.split(":")[0] for m in messages if m.role == "user"]


def test_keep_last_turns_sends_the_last_turns_whole_and_keeps_everything() -> None:
    model = chatty_model()
    agent = Agent(model, [add_numbers], history_strategy=KeepLastExchanges(2))
    result = converse(agent, 6)

    assert len(result.messages) == 6 * 4  # user, call, result, answer per question
    assert user_turns(result.messages) == [f"Question {n}" for n in range(1, 7)]
    last_two = model.requests[-2:]  # question 6: the call, then the answer
    for request in last_two:
        assert user_turns(request.messages) == ["Question 4", "Question 5", "Question 6"]
        assert_calls_paired(request.messages)
        assert list(request.messages) == list(result.messages[12 : 12 + len(request.messages)])
    assert len(last_two[1].messages) == 4 + 4 + 3  # two whole turns and the current one so far
    for request in model.requests:
        assert request.messages[0].role == "user"
        assert_calls_paired(request.messages)


def test_keep_no_earlier_turn_still_sends_the_whole_current_turn() -> None:
    script = [calls(call("add_numbers", f"c{i}", left=i, right=1)) for i in range(4)]
    model = ScriptedModel([*script, answer("done")])
    earlier = converse(Agent(chatty_model(), [add_numbers]), 2)
    agent = Agent(model, [add_numbers], history_strategy=KeepLastExchanges(0))
    result = agent.run_sync("Count up four times.", history=earlier.messages)
    last = model.requests[-1].messages
    assert last[0] == Message.user("Count up four times.")
    assert len(last) == 1 + 4 * 2  # the prompt and its four calls with their results
    assert result.messages[: len(earlier.messages)] == earlier.messages


def test_token_budget_keeps_each_request_under_the_budget() -> None:
    model = chatty_model()
    budget = 400
    agent = Agent(model, [add_numbers], history_strategy=TokenBudget(budget))
    result = converse(agent, 12)

    def size(messages: Sequence[Message]) -> int:
        return asyncio.run(model.count_tokens(messages))

    assert size(result.messages) > 3 * budget  # the conversation outgrew the budget long ago
    sizes = [size(request.messages) for request in model.requests]
    assert max(sizes) <= budget
    assert min(sizes[-6:]) > budget // 2  # it sends as much as fits, not just the current turn
    for request in model.requests:
        sent = list(request.messages)
        assert sent[0].role == "user"
        assert_calls_paired(sent)
        start = len(result.messages) - len(sent)  # what is sent is a tail of the conversation...
        assert any(result.messages[i : i + len(sent)] == tuple(sent) for i in range(start + 1))
    assert len(result.messages) == 12 * 4  # ...and the run keeps every turn


def test_the_default_token_count_is_a_documented_estimate() -> None:
    message = Message.user("x" * 40)
    assert estimate_tokens(message) == 4 + 10
    with_call = Message.assistant(calls(call("add_numbers", "c1", left=1, right=2)))
    assert estimate_tokens(with_call) == 4 + -(-len('add_numbers{"left": 1, "right": 2}') // 4)
    model = ScriptedModel([])
    assert asyncio.run(model.count_tokens([message, with_call])) == 14 + 13


def summaries() -> ScriptedModel:
    """A summariser that says which request it was and what it was given."""

    def step(request: RecordedRequest) -> object:
        text = request.messages[0].content
        extended = "The summary so far:" in text
        questions = re.findall(r"user: (Question \d+)", text)
        return answer(f"summary {'+' if extended else ''}{', '.join(questions)}")

    return ScriptedModel([step] * 50)  # type: ignore[list-item]


def test_summarize_sends_one_summary_in_place_of_the_dropped_turns() -> None:
    model, summariser = chatty_model(), summaries()
    strategy = Summarize(KeepLastExchanges(2), model=summariser)
    agent = Agent(model, [add_numbers], history_strategy=strategy)
    result = converse(agent, 5)

    # Questions 1-3 need no summary; 4 drops question 1; 5 drops question 2 as well.
    assert [r.messages[0].content for r in summariser.requests] == [
        "Summarise the conversation below in a few short paragraphs. Keep what the user "
        "wants, names, numbers, decisions, and the tool results that matter. Write the "
        "summary only.\n\nThe conversation:\n"
        f"user: Question 1: {FILLER}\n"
        'assistant called add_numbers({"left": 1, "right": 1})\n'
        "tool: 2\n"
        f"assistant: The result is 2. {FILLER}",
        "Summarise the conversation below in a few short paragraphs. Keep what the user "
        "wants, names, numbers, decisions, and the tool results that matter. Write the "
        "summary only.\n\nThe summary so far:\nsummary Question 1\n\nThe conversation:\n"
        f"user: Question 2: {FILLER}\n"
        'assistant called add_numbers({"left": 2, "right": 2})\n'
        "tool: 4\n"
        f"assistant: The result is 4. {FILLER}",
    ]
    assert summariser.requests[0].tools == ()
    assert summariser.requests[0].settings.tool_choice == "none"
    sent = model.requests[-1].messages  # question 5, its answer request
    assert sent[0] == Message.user(f"{SUMMARY_HEADING}\nsummary +Question 2")
    assert user_turns(sent[1:]) == ["Question 3", "Question 4", "Question 5"]
    assert_calls_paired(sent[1:])
    assert model.requests[-2].messages[0] == sent[0]  # the run's two requests, one summary
    assert result.history_summary is not None
    assert (result.history_summary.covers, result.history_summary.text) == (
        8,
        "summary +Question 2",
    )
    assert len(result.messages) == 5 * 4
    assert result.usage.requests == 2 + 1  # its two model turns and the summary request


def test_a_summary_given_back_after_a_restart_is_extended_not_made_again() -> None:
    first = converse(Agent(chatty_model(), [add_numbers]), 3)
    summariser = summaries()
    strategy = Summarize(KeepLastExchanges(2), model=summariser)
    agent = Agent(chatty_model(), [add_numbers], history_strategy=strategy)
    made = agent.run_sync(f"Question 4: {FILLER}", history=first.messages)
    assert made.history_summary is not None
    assert made.history_summary.text == "summary Question 1"

    fresh_summariser = summaries()  # a new process: a new strategy, the summary from storage
    restarted = Summarize(KeepLastExchanges(2), model=fresh_summariser)
    restarted.remember(made.history_summary)
    again = Agent(chatty_model(), [add_numbers], history_strategy=restarted)
    result = again.run_sync(f"Question 5: {FILLER}", history=made.messages)
    (request,) = fresh_summariser.requests
    assert "The summary so far:\nsummary Question 1" in request.messages[0].content
    assert "Question 1" not in request.messages[0].content.split("The conversation:")[1]
    assert result.history_summary is not None
    assert result.history_summary.text == "summary +Question 2"


def test_a_paused_run_resumes_with_its_summary_without_asking_again() -> None:
    summariser = summaries()
    strategy = Summarize(KeepLastExchanges(1), model=summariser)
    earlier = converse(Agent(chatty_model(), [add_numbers]), 2)
    model = chatty_model("double_checked")
    paused = Agent(model, [double_checked], history_strategy=strategy).run_sync(
        f"Question 3: {FILLER}", history=earlier.messages
    )
    assert paused.stop_reason == "paused"
    assert paused.checkpoint is not None
    assert paused.checkpoint.history_summary is not None
    assert len(summariser.requests) == 1

    checkpoint = paused.checkpoint.to_json()  # another process: a new agent and strategy
    other_summariser = summaries()
    resuming = Agent(
        model,
        [double_checked],
        history_strategy=Summarize(KeepLastExchanges(1), model=other_summariser),
    )
    result = resuming.resume_sync(checkpoint, {"c3": Approve()})
    assert result.answer.startswith("The result is 6.")
    assert other_summariser.requests == []
    assert model.requests[-1].messages[0] == Message.user(f"{SUMMARY_HEADING}\nsummary Question 1")


def test_an_empty_summary_stops_the_run_with_a_model_error() -> None:
    earlier = converse(Agent(chatty_model(), [add_numbers]), 2)
    strategy = Summarize(KeepLastExchanges(0), model=ScriptedModel([answer("")]))
    agent = Agent(chatty_model(), [add_numbers], history_strategy=strategy)
    with pytest.raises(ModelError) as stopped:
        agent.run_sync(f"Question 3: {FILLER}", history=earlier.messages)
    assert str(stopped.value) == (
        "the model (scripted) wrote an empty summary of 8 messages; "
        "give Summarize(model=...) a model that can summarise"
    )
    assert stopped.value.result is not None
    assert stopped.value.result.stop_reason == "model_error"


def test_bad_strategies_are_refused_with_what_to_write() -> None:
    with pytest.raises(ValueError, match=r"KeepLastExchanges needs a number of exchanges >= 0"):
        KeepLastExchanges(-1)
    with pytest.raises(ValueError, match=r"TokenBudget needs max_tokens >= 1, got 0"):
        TokenBudget(0)
    with pytest.raises(TypeError) as nested:
        Summarize(Summarize(KeepLastExchanges(1)))  # type: ignore[arg-type]
    assert str(nested.value) == (
        "Summarize(keep=...) takes KeepLastExchanges(...) or TokenBudget(...), "
        "got Summarize(KeepLastExchanges(1))"
    )
    with pytest.raises(TypeError) as messages:
        Agent(ScriptedModel([]), history_strategy=[Message.user("hi")])  # type: ignore[arg-type]
    assert str(messages.value) == (
        "history_strategy must be a history strategy such as KeepLastExchanges(10), got "
        "[Message(role='user', content='hi', tool_calls=(), tool_call_id=None, "
        "provider_items=(), untrusted=False)] (a run's earlier messages go to run(..., "
        "history=...))"
    )


class SeenByMiddleware(Middleware):
    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    async def before_request(self, request: ModelCall, ctx: RequestContext) -> ModelCall:
        self.seen.append(user_turns(request.messages))
        return request


def test_middleware_sees_what_the_strategy_sends() -> None:
    watcher = SeenByMiddleware()
    model = chatty_model()
    agent = Agent(model, [add_numbers], history_strategy=KeepLastExchanges(1), middleware=[watcher])
    converse(agent, 3)
    assert watcher.seen[-2:] == [["Question 2", "Question 3"]] * 2
    assert [user_turns(r.messages) for r in model.requests] == watcher.seen


def test_a_streamed_run_sends_what_the_strategy_keeps() -> None:
    model = chatty_model()
    earlier = converse(Agent(model, [add_numbers]), 3)
    agent = Agent(model, [add_numbers], history_strategy=KeepLastExchanges(1))

    async def stream() -> list[Event]:
        prompt = f"Question 4: {FILLER}"
        events = agent.stream(prompt, history=earlier.messages, deltas=True)
        return [event async for event in events]

    events = asyncio.run(stream())
    assert isinstance(events[-1], FinalAnswer)
    assert len(events[-1].result.messages) == 4 * 4
    assert [user_turns(r.messages) for r in model.requests[-2:]] == [
        ["Question 3", "Question 4"]
    ] * 2


async def test_a_long_conversation_in_a_session_stays_under_the_budget_and_keeps_every_turn(
    store: Store,
) -> None:
    model = chatty_model()
    budget = 400
    agent = Agent(model, [add_numbers], history_strategy=TokenBudget(budget))
    for number in range(1, 13):
        await agent.run(f"Question {number}: {FILLER}", session=store.session("long"))

    kept = (await store.session("long").load()).messages
    assert len(kept) == 12 * 4  # the session keeps every turn...
    assert await model.count_tokens(kept) > 3 * budget
    sizes = [await model.count_tokens(request.messages) for request in model.requests]
    assert max(sizes) <= budget  # ...while no request carries more than the budget
    assert user_turns(model.requests[-1].messages)[-1] == "Question 12"
    for request in model.requests:
        assert_calls_paired(request.messages)
