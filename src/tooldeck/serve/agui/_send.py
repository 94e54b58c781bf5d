"""A message added to a thread's running run: ``POST /messages``, beside the run's ``POST /``.

AG-UI gives a client no way to add a message to a run that is going on (a second
``RunAgentInput`` on a busy thread is refused: ``thread_busy``), so this endpoint is
tooldeck's own. Its body is JSON::

    {"threadId": "t1", "runId": "r1", "message": {"id": "u2", "role": "user", "content": "..."}}

``message`` is an AG-UI ``UserMessage`` whose content is text. The message waits for the
run's next model request and joins the conversation then (``RunHandle.send``); the run's
event stream shows it joining as a user text message under the client's id
(``TEXT_MESSAGE_START`` with ``role: "user"``, ``CONTENT``, ``END``; the start's
``metadata.tooldeck.sent`` is false when the run ended before another request: it is kept
at the end of the conversation, unanswered), and the run's ``MESSAGES_SNAPSHOT`` keeps that
id. Answers: 202 ``{"status": "queued", ...}``; 404 ``no_run`` (the thread has no run going
on: send it as the next run's prompt); 409 ``other_run`` (``runId`` is not the thread's run
going on) or ``run_ended`` (the run answered, paused, or was cancelled: the message says
which; nothing was added); 422 for a body that is not this.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ag_ui.core import TextPart, UserMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tooldeck.errors import RunEnded
from tooldeck.run._engine.inbox import Inbox
from tooldeck.run.cancel import CancelSignal
from tooldeck.run.handle import send_to


@dataclass
class LiveRun:
    """A thread's run going on, as the endpoint that adds messages to it sees it."""

    run_id: str
    """The client's id of the run (its ``RunAgentInput.runId``)."""
    inbox: Inbox
    signal: CancelSignal
    waiting: deque[UserMessage] = field(default_factory=deque)
    """The messages sent and not joined yet, oldest first (the run takes them in order)."""
    joined: list[UserMessage] = field(default_factory=list)
    """The messages that joined the conversation, in order (the snapshot keeps their ids)."""

    def take(self, count: int) -> list[UserMessage]:
        """The next ``count`` messages to join, as their client sent them."""
        taken = [self.waiting.popleft() for _ in range(min(count, len(self.waiting)))]
        self.joined.extend(taken)
        return taken


class SendBody(BaseModel):
    """The body of ``POST /messages``."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    thread_id: str = Field(alias="threadId", min_length=1)
    run_id: str = Field(alias="runId", min_length=1)
    message: UserMessage


async def send_message(request: Request, live: dict[str, LiveRun]) -> Response:
    """``POST /messages``: add the body's message to its thread's run going on."""
    try:
        body = SendBody.model_validate_json(await request.body())
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in error.errors()[:5]
        )
        return _refused(f"not a message for a running run: {problems}", "invalid_message", 422)
    text = _text(body.message)
    if not text:
        return _refused("the message has no text: send its content as text", "invalid_message", 422)
    run = live.get(body.thread_id)
    if run is None:
        return _refused(
            f"thread {body.thread_id!r} has no run going on: send the message as the next "
            "run's prompt (POST /)",
            "no_run",
            404,
        )
    if run.run_id != body.run_id:
        return _refused(
            f"the run going on in thread {body.thread_id!r} is {run.run_id!r}, not {body.run_id!r}",
            "other_run",
            409,
        )
    run.waiting.append(body.message)
    try:
        send_to(run.inbox, run.signal, text)
    except RunEnded as error:
        run.waiting.pop()
        return _refused(str(error), "run_ended", 409)
    queued = {"threadId": body.thread_id, "runId": body.run_id, "messageId": body.message.id}
    return JSONResponse({"status": "queued", **queued}, 202)


def _text(message: UserMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    if all(isinstance(part, TextPart) for part in message.content):
        return "".join(part.text for part in message.content if isinstance(part, TextPart))
    return ""


def _refused(message: str, code: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message, "code": code}, status)
