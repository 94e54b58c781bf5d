"""The front doors of the promise matrix (tests/test_promises.py), each as a person uses it:
a shop-support agent on the provider simulator (a fresh call id in every response, as a
hosted provider gives), its conversation kept in the session ``crash1``.

- ``LibraryDoor``: a Python process calling ``agent.run_sync(..., session=..., run_id=...)``
  (tests/_promise_library.py), what it read printed as JSON;
- ``CliDoor``: ``tooldeck run -t shop.py --session crash1``, stdout and stderr;
- ``WebDoor``: ``tooldeck web -t shop.py``, a message posted to its AG-UI endpoint in the
  thread ``crash1``, the events it answered and the chat page.

Each door can be killed (SIGKILL) where the shop's tools hang on demand (``SHOP_HANG``:
``refund`` after the refund's effect, ``lookup`` in the lookup, after the model's turn was
received), and asked again in another process. Every refund appends its idempotency key to
``effects``: what happened in the world.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from ag_ui.core import CustomEvent, RunFinishedEvent, TextMessageContentEvent

from _agui import approve, new_input, parse
from _durable_harness import DurableApp
from _pty import Terminal
from test_cli_web import _read_until_url, url_of
from tooldeck import Agent
from tooldeck.testing import (
    ProviderSimulator,
    SimRequest,
    after_tool,
    call,
    last_user_contains,
    reply,
    rule,
)

PROMPT = "Did my refund go through? If not, refund it."
LATER = "Where is my order?"
ASKED_OF_BILLING = "Refund order A1."
INTERRUPTED = "error[interrupted]: the call may have completed"
HERE = Path(__file__).parent

SHOP = '''
import os
import time
from pathlib import Path

from tooldeck import Agent, ModelSettings, RunContext, tool
from tooldeck.models import ModelPrices
from tooldeck.run.guardrails import GuardrailResult


def hang_here(point: str, ctx: RunContext | None = None) -> None:
    hang = os.environ.get("SHOP_HANG")
    if hang in (point, point + "-briefly"):
        Path(os.environ["SHOP_EFFECTS"] + ".hanging").touch()
        time.sleep(600 if hang == point else 3)
    if hang == point + "-until-cancelled" and ctx is not None and ctx.cancelled is not None:
        Path(os.environ["SHOP_EFFECTS"] + ".hanging").touch()
        if ctx.cancelled.wait(timeout=120):
            Path(os.environ["SHOP_EFFECTS"] + ".told").touch()  # the tool was told


@tool(trust="untrusted" if os.environ.get("SHOP_UNTRUSTED") == "1" else "trusted")
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    hang_here("lookup")
    return f"order {order_id}: paid, not refunded"


@tool(side_effects=True, requires_approval=os.environ.get("SHOP_APPROVAL") == "1")
def refund_order(ctx: RunContext, order_id: str) -> str:
    """Refund an order."""
    with open(os.environ["SHOP_EFFECTS"], "a") as effects:
        effects.write(ctx.idempotency_key + "\\n")
    hang_here("refund", ctx)
    return f"refunded {order_id}"


# SHOP_MAX_COST: the shop's runs have a cost limit; billing's turns are priced as theirs
PRICED = ModelSettings(prices=ModelPrices(0, 1_000_000)) if os.environ.get("SHOP_MAX_COST") else None


def no_refund_promises(ctx, answer):
    if "Refunded" in str(answer):
        return GuardrailResult.tripped("a refund is confirmed by e-mail, never in the chat")
    return GuardrailResult.passed()


if os.environ.get("SHOP_GUARD") == "1":
    output_guardrails = [no_refund_promises]
if os.environ.get("SHOP_UNTRUSTED") == "1":  # the lookup reads what customers wrote
    after_untrusted = "ask"

if os.environ.get("SHOP_HANDOFF") == "1":  # the refund is billing's, handed the conversation
    billing = Agent("openai-chat:gpt-4.1-mini", tools=[refund_order], name="billing")
    __all__ = ["lookup_order"]
    handoffs = [billing]

if os.environ.get("SHOP_AGENT_TOOL") == "1":  # the refund is billing's, asked as a tool
    billing = Agent(
        "openai-chat:gpt-4.1-mini", tools=[refund_order], name="billing", settings=PRICED
    )
    ask_billing = billing.as_tool(name="ask_billing", description="Ask billing for a refund.")
    __all__ = ["lookup_order", "ask_billing"]
'''


def _may_hand_to_billing(request: SimRequest) -> bool:
    return after_tool("lookup_order")(request) and "transfer_to_billing" in request.tool_names


def _may_ask_billing(request: SimRequest) -> bool:
    return after_tool("lookup_order")(request) and "ask_billing" in request.tool_names


def _billing_asked(request: SimRequest) -> bool:
    """Billing's own run, asked as a tool: its prompt is the outer model's request."""
    last = request.last
    return last is not None and last.role == "user" and last.text == ASKED_OF_BILLING


def shop_rules() -> list[Any]:
    """The model a shop's provider would be: it reads the conversation and answers it (an
    agent offered ``transfer_to_billing`` hands the conversation to billing after the lookup;
    one offered ``ask_billing`` asks billing, whose own run refunds)."""
    refund = call("refund_order", {"order_id": "A1"})
    return [
        rule(after_tool("refund_order"), reply("Refunded.")),
        rule(after_tool("ask_billing"), reply("Refunded.")),
        rule(_billing_asked, refund),
        rule(after_tool("transfer_to_billing"), refund),
        rule(_may_hand_to_billing, call("transfer_to_billing", {})),
        rule(_may_ask_billing, call("ask_billing", {"input": ASKED_OF_BILLING})),
        rule(after_tool("lookup_order"), refund),
        rule(last_user_contains("refund"), call("lookup_order", {"order_id": "A1"})),
        rule(last_user_contains("where"), reply("It is on its way.")),
    ]


@dataclass
class Told:
    """What the person read of one prompt's run: the answer, whether (and how) the door said
    it went on from or closed an unfinished run, and everything it showed."""

    answer: str | None
    recovered: list[str]
    """How each run the door said it met again became (``RunRecovered.how``): ``"continued"``,
    ``"closed"`` or ``"stored"``."""
    shown: str
    stop: str = ""
    """The stop reason, where the door says it (the library's ``result.stop_reason``)."""


@dataclass
class Shop:
    """The shop's workdir, its provider and what happened in the world."""

    workdir: Path
    sim: ProviderSimulator
    approval: bool = False
    handoff: bool = False
    """The refund belongs to billing, whom the shop's agent hands the conversation to."""
    agent_tool: bool = False
    """The refund belongs to billing, an agent the shop's agent calls as a tool."""
    max_requests: int | None = None
    """The library's runs share a budget of this many model requests."""
    max_cost: int | None = None
    """Each run may spend this many dollars, each output token priced a dollar: at the CLI and
    web ``--max-cost N --price 0,1000000 --on-limit final-answer``, the library the same
    ``Limits``, prices and ``on_limit``."""
    guarded: bool = False
    """The shop's module has an output guardrail: no answer may confirm a refund."""
    untrusted: bool = False
    """The lookup's results are untrusted, and the module says ``after_untrusted = "ask"``."""

    def __post_init__(self) -> None:
        (self.workdir / "shop.py").write_text(SHOP)

    def env(self, hang: str = "") -> dict[str, str]:
        kept = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI")}
        return {
            **kept,
            **self.sim.env,
            "TOOLDECK_HOME": str(self.workdir / "home"),
            "SHOP_EFFECTS": str(self.workdir / "effects"),
            "SHOP_HANG": hang,
            "SHOP_APPROVAL": "1" if self.approval else "",
            "SHOP_HANDOFF": "1" if self.handoff else "",
            "SHOP_AGENT_TOOL": "1" if self.agent_tool else "",
            "SHOP_MAX_REQUESTS": str(self.max_requests or ""),
            "SHOP_MAX_COST": str(self.max_cost or ""),
            "SHOP_GUARD": "1" if self.guarded else "",
            "SHOP_UNTRUSTED": "1" if self.untrusted else "",
            "PYTHONUNBUFFERED": "1",
        }

    def run_options(self) -> list[str]:
        """The options ``tooldeck run`` and ``tooldeck web`` are given for the shop's runs."""
        if self.max_cost is None:
            return []
        return [
            "--max-cost", str(self.max_cost), "--price", "0,1000000", "--on-limit", "final-answer"
        ]  # fmt: skip

    @property
    def hanging(self) -> Path:
        return self.workdir / "effects.hanging"

    def refunds(self) -> list[str]:
        effects = self.workdir / "effects"
        return effects.read_text().splitlines() if effects.exists() else []

    def agent_here(self) -> Any:
        """The shop's agent in this process (the shop's tools and handoffs imported from its
        file, under the environment ``env()`` gives)."""
        spec = importlib.util.spec_from_file_location("shop", self.workdir / "shop.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        names = getattr(module, "__all__", ["lookup_order", "refund_order"])
        tools = [getattr(module, name) for name in names]
        return Agent(self.sim.model(), tools=tools, handoffs=getattr(module, "handoffs", []))

    def model_read(self) -> list[tuple[str, str | None]]:
        """The conversation the model was sent in its last request: (role, text)."""
        return [(m["role"], m.get("content")) for m in self.sim.requests[-1]["messages"]]

    def times_asked(self, prompt: str) -> int:
        """How many requests ended with the person's ``prompt`` (a round asked again shows)."""
        return sum(r["messages"][-1].get("content") == prompt for r in self.sim.requests)


def interrupted(read: tuple[str, str | None], side_effects: bool = True) -> bool:
    """Whether a message the model read is a call's result saying it was interrupted (a
    side-effect call's says it may have completed)."""
    role, text = read
    said = INTERRUPTED if side_effects else "error[interrupted]: "
    return role == "tool" and text is not None and text.startswith(said)


def kill_when_hanging(child: subprocess.Popen[Any], shop: Shop) -> None:
    """SIGKILL ``child`` once a shop tool hangs (or fail, saying what it printed)."""
    deadline = time.monotonic() + 120
    try:
        while not shop.hanging.exists():
            if child.poll() is not None:
                out, err = child.communicate()
                raise AssertionError(f"the door ended before the hang: {out[-2000:]}{err[-3000:]}")
            assert time.monotonic() < deadline, "the door never reached the hang"
            time.sleep(0.01)
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=60)
        shop.hanging.unlink(missing_ok=True)
    assert child.returncode == -signal.SIGKILL


class DurableDoor(DurableApp):
    """The promise matrix's shop (tests/_promise_doors.py) as a DurableAgent: its workers and
    clients, processes of ``_durable_shop.py`` on the suite's PostgreSQL, started, killed and
    read. ``budget_dsn``: where the shop's budget keeps its counts (a PostgresBudget), if not
    in each process."""

    def __init__(self, shop: Shop, db: str, sessions_dsn: str = "", budget_dsn: str = "") -> None:
        super().__init__(shop.workdir, db, f"dbos_{uuid.uuid4().hex[:8]}")
        self.shop = shop
        self.sessions_dsn = sessions_dsn
        self.budget_dsn = budget_dsn
        self.wait_s = 180.0

    def command(self, mode: str) -> list[str]:
        script, workdir = str(HERE / "_durable_shop.py"), str(self.shop.workdir)
        argv = [sys.executable, script, mode, workdir, "--db", self.db]
        return [*argv, "--base-url", self.shop.sim.base_url, "--sessions-dsn", self.sessions_dsn]

    def spawn(
        self, mode: str, *, executor: str = "worker-1", hang: str = "", **options: Any
    ) -> subprocess.Popen[str]:
        env = {**self.shop.env(hang), "SHOP_BUDGET_DSN": self.budget_dsn}
        return super().spawn(mode, executor=executor, env=env, **options)

    def told(self, mode: str, **options: str) -> Any:
        """What the person's code read, from a process of ``mode`` that ended well."""
        return self.output(self.spawn(mode, **options))

    def killed(self, hang: str, **options: str) -> None:
        """A run started as ``options`` say, its worker SIGKILLed where a shop tool hangs."""
        kill_when_hanging(self.spawn("run", hang=hang, **options), self.shop)

    def killed_asking(self, requests: int, **options: str) -> None:
        """A run started as ``options`` say, its worker SIGKILLed while it waits for the
        model's answer to its ``requests``-th request (the simulator hangs there)."""
        process = self.spawn("run", **options)
        self.wait_until(lambda: len(self.shop.sim.requests) >= requests, "the model asked again")
        self.kill(process)


@dataclass
class LibraryDoor:
    """``agent.run_sync`` in a Python process of its own (tests/_promise_library.py)."""

    shop: Shop
    run_id: str = "run-7"
    """The id the person's code gives the run of the first prompt (its retries give it again);
    another prompt is a new run ("-": tooldeck makes its id)."""
    name: str = "library"

    def command(self, prompt: str, decide: str) -> list[str]:
        """The argv of the person's code running ``prompt`` (or the decision ``decide``)."""
        script = str(HERE / "_promise_library.py")
        workdir, url = str(self.shop.workdir), self.shop.sim.base_url
        run_id = self.run_id if prompt in (PROMPT, "") else "-"
        return [sys.executable, script, workdir, url, prompt, run_id, decide]

    def killed(self, prompt: str, hang: str, approving: bool = False) -> None:
        child = subprocess.Popen(
            self.command("" if approving else prompt, "approve" if approving else "-"),
            env=self.shop.env(hang),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        kill_when_hanging(child, self.shop)

    def ask(self, prompt: str, decide: str = "-", ok: bool = True) -> Told:
        done = subprocess.run(
            self.command(prompt, decide),
            env=self.shop.env(),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        outcome = json.loads(done.stdout.splitlines()[-1])
        answer, stop = outcome["answer"], outcome["stop_reason"]
        return Told(answer, outcome["recovered"], done.stdout, stop)

    def approve(self, ok: bool = True) -> Told:
        """The session's paused run resumed, its waiting call approved."""
        return self.ask("", "approve")


@dataclass
class CliDoor:
    """``tooldeck run PROMPT -t shop.py --session crash1`` against the simulator."""

    shop: Shop
    name: str = "CLI"

    def _command(self, prompt: str, *extra: str) -> list[str]:
        return [
            sys.executable, "-m", "tooldeck.cli", "run", prompt, "--session", "crash1",
            "-t", str(self.shop.workdir / "shop.py"), "--model", "openai-chat:gpt-4.1-mini",
            "--base-url", self.shop.sim.base_url, "--no-display", *self.shop.run_options(),
            *extra,
        ]  # fmt: skip

    def killed(self, prompt: str, hang: str, approving: bool = False) -> None:
        extra = ("--approve", "refund_order") if approving else ()
        child = subprocess.Popen(
            self._command(prompt, *extra),
            env=self.shop.env(hang),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        kill_when_hanging(child, self.shop)

    def ask(self, prompt: str, *extra: str, ok: bool = True) -> Told:
        """``prompt`` run; ``ok``: the command must end with status 0 (else: must not)."""
        done = subprocess.run(
            self._command(prompt, *extra),
            env=self.shop.env(),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert (done.returncode == 0) is ok, done.stderr[-3000:]
        said = {"continued": "goes on from its journal", "closed": "stopped before it finished"}
        recovered = [how for how, words in said.items() if words in done.stderr]
        return Told(done.stdout.rstrip("\n"), recovered, done.stdout + done.stderr)

    def at_terminal(self, prompt: str) -> Terminal:
        """``prompt`` run at a terminal (a pty): a person there answers its questions."""
        return Terminal(self._command(prompt), self.shop.workdir, self.shop.env())

    def ctrl_c(self, prompt: str, hang: str) -> tuple[int, str]:
        """``prompt`` run at a terminal (a pty, its controlling terminal) until a shop tool
        hangs there, then Ctrl-C typed: the exit status and everything shown."""
        terminal = Terminal(
            self._command(prompt), self.shop.workdir, self.shop.env(hang), controlling=True
        )
        try:
            deadline = time.monotonic() + 120
            while not self.shop.hanging.exists():
                assert terminal.process.poll() is None, f"it ended first:\n{terminal.shown}"
                assert time.monotonic() < deadline, f"it never hung:\n{terminal.shown}"
                time.sleep(0.01)
            terminal.send("\x03")
            return terminal.finish()
        finally:
            terminal.kill()
            self.shop.hanging.unlink(missing_ok=True)

    def approve(self, ok: bool = True) -> Told:
        """Another prompt with ``--approve refund_order``: the session's paused run goes on
        first, its call approved (its answer, if it gave one, is the one told)."""
        told = self.ask(LATER, "--approve", "refund_order", ok=ok)
        _, found, answer = told.shown.partition(f"answer to {PROMPT!r}: ")
        return Told(answer.splitlines()[0] if found else None, told.recovered, told.shown)


@dataclass
class WebDoor:
    """``tooldeck web -t shop.py``: a message posted to the AG-UI endpoint, thread crash1."""

    shop: Shop
    name: str = "web/AG-UI"

    @contextmanager
    def _server(self, hang: str) -> Iterator[tuple[subprocess.Popen[str], httpx.Client]]:
        command = [
            sys.executable, "-m", "tooldeck.cli", "web", "--port", "0",
            "-t", str(self.shop.workdir / "shop.py"), "--model", "openai-chat:gpt-4.1-mini",
            "--base-url", self.shop.sim.base_url, *self.shop.run_options(),
        ]  # fmt: skip
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=self.shop.env(hang),
        )
        try:
            _, port, token = url_of(_read_until_url(process))
            headers = {"authorization": f"Bearer {token}", "accept": "text/event-stream"}
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
                yield process, client
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=60)
            assert process.stdout is not None
            process.stdout.close()

    def _input(self, prompt: str, approving: bool = False) -> dict[str, Any]:
        """A client's RunAgentInput: the first prompt's run keeps its id (a client that
        sends it again gives it again), the approval of the session's waiting call."""
        if approving:
            waiting = json.loads((self.shop.workdir / "pending.json").read_text())
            return new_input("crash1", resume=[approve(waiting["digests"][0], approved=True)])
        body = new_input("crash1", prompt)
        if prompt == PROMPT:
            body["runId"] = "run-7"
        return body

    def killed(self, prompt: str, hang: str, approving: bool = False) -> None:
        body = self._input(prompt, approving)
        with self._server(hang) as (process, client), client.stream("POST", "/agui/", json=body):
            deadline = time.monotonic() + 120
            while not self.shop.hanging.exists():
                assert time.monotonic() < deadline, "tooldeck web never reached the hang"
                time.sleep(0.01)
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
        self.shop.hanging.unlink(missing_ok=True)

    def gone(self, prompt: str, hang: str, approving: bool = False) -> bool:
        """``prompt`` posted (or the approval, ``approving``); once a shop tool hangs, the
        client goes away (the stream closed, as a page closed). Whether the tool was then
        told (``effects.told``, written while the server still runs; 120 s at most)."""
        told = self.shop.workdir / "effects.told"
        body = self._input(prompt, approving)
        with self._server(hang) as (process, client):
            with client.stream("POST", "/agui/", json=body):  # closed once the tool hangs
                deadline = time.monotonic() + 120
                while not self.shop.hanging.exists():
                    assert time.monotonic() < deadline, "tooldeck web never reached the hang"
                    time.sleep(0.01)
            deadline = time.monotonic() + 120
            while not told.exists() and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.01)
        self.shop.hanging.unlink(missing_ok=True)
        return told.exists()

    def ask(self, prompt: str, approving: bool = False, ok: bool = True) -> Told:
        with self._server("") as (_, client):
            response = client.post("/agui/", json=self._input(prompt, approving))
            assert response.status_code == 200, response.text
            page = client.get("/chat/crash1")
            assert page.status_code == 200
            runs = client.get("/runs", params={"session": "crash1"})  # each run's cost
            assert runs.status_code == 200
        return told_by(response.text, page.text + runs.text)

    def approve(self, ok: bool = True) -> Told:
        """The session's paused run resumed: its interrupt answered, approved."""
        return self.ask("", approving=True)

    def two_at_once(self, prompt: str, other: str) -> tuple[Told, str]:
        """``prompt`` posted, and while its refund runs (SHOP_HANG=refund-briefly), ``other``
        posted to the same thread: what the first was told, and the second's response."""
        with self._server("refund-briefly") as (_, client):
            with client.stream("POST", "/agui/", json=self._input(prompt)) as first:
                deadline = time.monotonic() + 120
                while not self.shop.hanging.exists():
                    assert time.monotonic() < deadline, "tooldeck web never reached the refund"
                    time.sleep(0.01)
                second = client.post("/agui/", json=self._input(other))
                text = "".join(first.iter_text())
            page = client.get("/chat/crash1")
        return told_by(text, page.text), second.text

    def two_threads(self, prompt: str) -> tuple[Told, Told]:
        """``prompt`` posted to the thread crash1 and, while its lookup runs
        (SHOP_HANG=lookup-briefly), to the thread crash2 of the same server: what each was
        told (its events and its conversation's page)."""
        with self._server("lookup-briefly") as (_, client):
            with client.stream("POST", "/agui/", json=self._input(prompt)) as first:
                deadline = time.monotonic() + 120
                while not self.shop.hanging.exists():
                    assert time.monotonic() < deadline, "tooldeck web never reached the lookup"
                    time.sleep(0.01)
                second = client.post("/agui/", json=new_input("crash2", prompt))
                text = "".join(first.iter_text())
            pages = [client.get(f"/chat/{thread}").text for thread in ("crash1", "crash2")]
        return told_by(text, pages[0]), told_by(second.text, pages[1])


def told_by(stream: str, page: str) -> Told:
    """What the person read of one AG-UI response: its answer (RUN_FINISHED's, else the
    text streamed), its recovered runs, the page."""
    events = parse(stream)
    finished = [e.result for e in events if isinstance(e, RunFinishedEvent)]
    streamed = "".join(e.delta for e in events if isinstance(e, TextMessageContentEvent))
    text = finished[0] if finished and isinstance(finished[0], str) else streamed
    recovered = [
        event.value["how"]
        for event in events
        if isinstance(event, CustomEvent) and event.name == "tooldeck.recovered"
    ]
    return Told(text or None, recovered, stream + page)
