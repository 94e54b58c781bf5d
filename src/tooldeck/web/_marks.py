"""What the chat page shows beside a conversation's messages, read back from the run log, so
that a reload shows what the live page showed: the link to each earlier run (after its
last message) and the decisions a person made on calls (approved, edited, rejected, an
external call's result given)."""

from __future__ import annotations

from typing import Any

from tooldeck.run.session import History
from tooldeck.runlog.read import LoggedRun, decided_calls, list_runs
from tooldeck.web._site import Site


def run_marks(site: Site, thread: str, history: History, shown: int) -> dict[str, Any]:
    """``runs``: each stored run (then the paused one) with ``end``, the number of the page's
    messages up to its last (of ``shown``), and what its foot shows when the log holds it;
    ``decisions``: each decided call of the
    conversation's runs, by run and call id. Blocking: call it from a thread.

    Raises:
        RunLogError: the run log cannot be read (the message names it).
    """
    if site.run_log is not None:
        site.run_log.flush()  # the agent's own runs, written before they are read
    logged = {run.run_id: run for run in list_runs(site.log_path, None, session=thread)}
    runs: list[dict[str, Any]] = []
    end = 0
    for run_id, count in history.stored_runs:
        end += count
        if end <= shown:  # (a paused run's checkpoint holds what the page shows)
            runs.append({"end": end, "runId": run_id, **_foot(logged.get(run_id))})
    if history.pending is not None:
        run_id = history.pending.run_id
        runs.append({"end": shown, "runId": run_id, **_foot(logged.get(run_id))})
    decisions = [
        {
            "runId": run_id,
            "callId": call.call_id,
            "decision": call.decision,
            "edited": call.edited_arguments is not None,
        }
        for run_id, call in decided_calls(site.log_path, thread)
    ]
    return {"runs": runs, "decisions": decisions}


def _foot(run: LoggedRun | None) -> dict[str, Any]:
    """A logged run as the page's foot line shows it (the fields of the live STATE_SNAPSHOT's);
    nothing for a run the log does not hold (no foot: its link would lead nowhere)."""
    if run is None:
        return {}
    return {
        "stopReason": run.status,
        "answered": bool(run.answer) or run.ended_at is None,  # (a killed run: not a stop)
        "usage": {
            "requests": run.model_turns,
            "inputTokens": run.input_tokens,
            "outputTokens": run.output_tokens,
        },
    }
