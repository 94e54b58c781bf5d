"""The one place that speaks a2a-sdk: fetch and check a card, send a message, read the
task's events, cancel it. Imported only when a remote agent is first used (``a2a`` extra).

Everything read from the remote (its card, its events, the data part of an input request)
is untrusted input: a shape tooldeck does not read is a ``ToolDeckError`` naming what was
wrong, never a guess.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

try:
    import a2a.client  # noqa: F401 - the check that the extra is installed
except ImportError as missing:  # pragma: no cover - the dev extra installs it
    raise ImportError("tooldeck.remote needs a2a-sdk: pip install 'tooldeck[a2a]'") from missing

import httpx
from a2a.client import A2AClientError, Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.helpers import get_data_parts, new_data_part
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from tooldeck.errors import ToolDeckError
from tooldeck.remote._pending import (
    RemotePending,
    pending_from_data,
    pending_part,
    plain_question,
)

WIRE_ERRORS = (A2AClientError, A2AError, httpx.HTTPError, ValueError)
"""What the a2a-sdk client and httpx raise for a remote that cannot be reached or read, or
that answers a request with an A2A error."""
REFUSALS = (InvalidParamsError, UnsupportedOperationError, TaskNotFoundError)
"""The A2A errors a remote answers a message it will not take with (its words say why)."""
ANSWER = "answer"
"""The name of the artifact that holds a remote's whole answer, when it has one."""
ENDED = frozenset({"completed", "failed", "canceled", "rejected"})
"""The states after which a task takes no more messages."""


def card_from_json(data: Any, where: str) -> AgentCard:
    """The agent card in ``data`` (JSON read from ``where``), or why it is not one."""
    if not isinstance(data, Mapping):
        raise ToolDeckError(f"the agent card at {where} is not a JSON object")
    try:
        return parse_agent_card(dict(data))
    except Exception as error:  # protobuf's ParseError (its stubs are not installed)
        raise ToolDeckError(
            f"the agent card at {where} is not one a2a-sdk reads: {error}"
        ) from None


def card_of(card: AgentCard | Mapping[str, Any]) -> AgentCard:
    """A card given to ``A2AAgent``: an a2a-sdk ``AgentCard`` or its JSON as a dict."""
    if isinstance(card, AgentCard):
        return card
    return card_from_json(card, "A2AAgent(card)")


def card_urls(card: AgentCard) -> tuple[str, ...]:
    """Every URL the card names for its RPC interfaces."""
    urls = tuple(interface.url for interface in card.supported_interfaces)
    if not urls:
        raise ToolDeckError(f"the agent card of {card.name!r} names no interface to call")
    return urls


def open_client(card: AgentCard, http: httpx.AsyncClient) -> Client:
    """An a2a-sdk client for the card's JSON-RPC or HTTP+JSON interface, on ``http``."""
    config = ClientConfig(
        streaming=True, httpx_client=http, supported_protocol_bindings=["JSONRPC", "HTTP+JSON"]
    )
    try:
        return ClientFactory(config).create(card)
    except ValueError as error:
        raise ToolDeckError(
            f"the agent card of {card.name!r} offers no interface tooldeck speaks "
            f"(JSON-RPC or HTTP+JSON): {error}"
        ) from None


def text_message(text: str, task_id: str = "", context_id: str = "") -> Message:
    """A user message holding ``text`` (on a task and context when given)."""
    return _message([Part(text=text)], task_id, context_id)


def reply_message(data: dict[str, Any] | None, text: str, task_id: str, context_id: str) -> Message:
    """A reply on a task: one data part (the decisions), or else ``text`` (an answer)."""
    parts = [new_data_part(data)] if data is not None else [Part(text=text)]
    return _message(parts, task_id, context_id)


def _message(parts: list[Part], task_id: str, context_id: str) -> Message:
    return Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=parts,
        task_id=task_id,
        context_id=context_id,
    )


async def send(client: Client, message: Message) -> AsyncIterator[StreamResponse]:
    """The task's events for ``message``, streamed."""
    async for response in client.send_message(SendMessageRequest(message=message)):
        yield response


async def cancel(client: Client, task_id: str) -> None:
    """Ask the remote to cancel the task (CancelTask)."""
    await client.cancel_task(CancelTaskRequest(id=task_id))


async def subscribe(client: Client, task_id: str) -> AsyncIterator[StreamResponse]:
    """The task's events from now on (SubscribeToTask), its current state first."""
    async for response in client.subscribe(SubscribeToTaskRequest(id=task_id)):
        yield response


async def task_now(client: Client, task_id: str) -> StreamResponse:
    """The task as it stands (GetTask), as the event a stream would carry."""
    task: Task = await client.get_task(GetTaskRequest(id=task_id))
    return StreamResponse(task=task)


def state_name(state: int) -> str:
    """``TaskState.TASK_STATE_INPUT_REQUIRED`` -> ``"input_required"``."""
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower()


@dataclass
class Progress:
    """What a task's events have said so far: its ids, its state, its text."""

    task_id: str = ""
    context_id: str = ""
    state: str = "submitted"
    said: str = ""
    """The text of the last status message (a question, why it failed)."""
    artifacts: dict[str, str] = field(default_factory=dict)
    """Artifact id -> its text so far."""
    answer_id: str = ""
    """The id of the artifact named ``answer``, if the remote marks its answer so (a tooldeck
    server streams its text as other artifacts, then the whole answer as this one)."""
    pending: tuple[RemotePending, ...] = ()
    told: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the remote has named the task (``task_id`` is known)."""

    @property
    def text(self) -> str:
        """The remote's answer: its ``answer`` artifact's text, or else all its artifacts'
        text, or else its last status message."""
        if self.answer_id:
            return self.artifacts[self.answer_id]
        return "".join(self.artifacts.values()) or self.said

    def take(self, response: StreamResponse) -> str:
        """Read one event; return the text it adds (for the caller's stream)."""
        added = self._take(response)
        if self.task_id:
            self.told.set()
        return added

    def _take(self, response: StreamResponse) -> str:
        kind = response.WhichOneof("payload")
        if kind == "message":
            self.state = "completed"
            self.said = _text_of(response.message)
            return self.said
        if kind == "task":
            task = response.task
            self.task_id, self.context_id = task.id, task.context_id
            for artifact in task.artifacts:
                self._name(artifact)
                self.artifacts[artifact.artifact_id] = "".join(p.text for p in artifact.parts)
            return self._status(task.status.state, task.status.message, task.status)
        if kind == "status_update":
            update = response.status_update
            self.task_id, self.context_id = update.task_id, update.context_id
            status = update.status
            return self._status(status.state, status.message, status)
        if kind == "artifact_update":
            update = response.artifact_update
            self.task_id, self.context_id = update.task_id, update.context_id
            added = "".join(part.text for part in update.artifact.parts)
            key = self._name(update.artifact)
            before = self.artifacts.get(key, "") if update.append else ""
            self.artifacts[key] = before + added
            return added
        raise ToolDeckError(f"the remote sent an event tooldeck does not read: {kind!r}")

    def _name(self, artifact: Any) -> str:
        """Note an artifact named ``answer``; return its id."""
        if artifact.name == ANSWER:
            self.answer_id = artifact.artifact_id
        return str(artifact.artifact_id)

    def _status(self, state: int, message: Message, status: Any) -> str:
        self.state = state_name(state)
        if not status.HasField("message"):
            return ""
        self.said = _text_of(message)
        if self.state == "input_required":
            self.pending = _pending_of(message, self.said)
            return ""  # the question shows as the pause, not as the answer's text
        return self.said if self.state == "working" else ""


def _text_of(message: Message) -> str:
    return "\n".join(part.text for part in message.parts if part.text)


def _pending_of(message: Message, said: str) -> tuple[RemotePending, ...]:
    for data in get_data_parts(list(message.parts)):
        if pending_part(data):
            return pending_from_data(data)
    return (plain_question(said),)
