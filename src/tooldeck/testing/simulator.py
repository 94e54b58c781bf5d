"""``ProviderSimulator``: an OpenAI-compatible server on loopback, run by uvicorn in a
background thread of the process that holds it.

Other processes reach it by ``base_url`` (``sim.env`` holds the variables the ``openai``
SDK and the ``tooldeck`` CLI read); a client that dies mid-request (SIGKILL) leaves it
serving the next step.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, overload

import uvicorn

from tooldeck.testing._app import QuietCuts, Stopping, build_app
from tooldeck.testing.exchanges import Exchange, Ledger
from tooldeck.testing.rules import Rule, Script
from tooldeck.testing.steps import StepLike

if TYPE_CHECKING:
    from tooldeck.models.openai import OpenAIChatModel, OpenAIResponsesModel

API_KEY = "sk-tooldeck-simulator"
"""The key ``sim.model()`` and ``sim.env`` give clients (the simulator accepts any)."""
DEFAULT_MODEL = "gpt-4.1-mini"
"""The model the simulator says it is by default: genai-prices knows its price."""


class UnscriptedRequests(AssertionError):
    """Requests came that no rule and no step was left for (raised as the ``with`` block
    ends, naming each; ``strict=False`` only records them in ``sim.unscripted``)."""


class ProviderSimulator:
    """A scripted OpenAI-compatible provider on ``127.0.0.1``: Chat Completions and Responses.

    Args:
        steps: One step per request, in order: ``reply(...)``, ``call(...)``, ``fail.*(...)``,
            or a function of the request returning one.
        rules: Rules asked before the list: ``rule(when=..., then=...)``.
        model: The model name responses report; a name genai-prices knows gets priced.
        host: The address to listen on.
        port: The port; 0 picks a free one.
        strict: Raise ``UnscriptedRequests`` when the ``with`` block ends if a request found
            no step left (it got HTTP 500 either way).
        on_exchange: Called with each ``Exchange`` as its answer starts (in the server's
            thread: keep it quick), e.g. to log what each request got.
    """

    def __init__(
        self,
        steps: Sequence[StepLike] = (),
        *,
        rules: Sequence[Rule] = (),
        model: str = DEFAULT_MODEL,
        host: str = "127.0.0.1",
        port: int = 0,
        strict: bool = True,
        on_exchange: Callable[[Exchange], object] | None = None,
    ) -> None:
        if isinstance(steps, str) or not isinstance(steps, Sequence):
            raise TypeError(f"ProviderSimulator takes a list of steps, got {steps!r}")
        if not isinstance(model, str) or not model:
            raise ValueError(f"model= is the model name responses report, got {model!r}")
        self.model_name = model
        self.strict = strict
        self._script = Script(steps, rules)
        self._ledger = Ledger(on_exchange)
        self._stopping = Stopping()
        self._address = (host, port)
        self._listener: socket.socket | None = None
        self._bound: tuple[str, int] | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    # -- where it is -------------------------------------------------------------------

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the simulator must be started)."""
        if self._bound is None:
            raise RuntimeError("the simulator is not started: use `with sim:` or sim.start()")
        host, port = self._bound
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: what ``base_url=`` and ``--base-url`` take."""
        return f"{self.root_url}/v1"

    @property
    def env(self) -> dict[str, str]:
        """``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` for a child process (the SDK and the
        ``tooldeck`` CLI read them)."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": API_KEY}

    # -- what happened -----------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The JSON body of every request received, in order."""
        return [dict(exchange.request.body) for exchange in self._ledger.exchanges]

    @property
    def exchanges(self) -> list[Exchange]:
        """Every request with the step that answered it and the call ids it was given."""
        return list(self._ledger.exchanges)

    @property
    def call_ids(self) -> list[str]:
        """Every tool-call id the simulator gave, in order."""
        return [call_id for exchange in self._ledger.exchanges for call_id in exchange.call_ids]

    @property
    def unscripted(self) -> list[str]:
        """What went wrong: a request nothing was left for, or a step function that raised."""
        return list(self._ledger.unscripted)

    @property
    def steps_left(self) -> int:
        """Steps of the list not used yet."""
        return self._script.steps_left

    def add(self, *steps: StepLike) -> None:
        """Append steps to the list, while it serves: e.g. the script of the next process,
        once a test has seen what the last one did."""
        self._script.add(steps)

    def wait_for_requests(self, count: int, timeout: float = 30.0) -> None:
        """Block until ``count`` requests have arrived (their answers may still be under
        way: a hanging step's request counts as soon as it is held)."""
        if not self._ledger.wait_for(count, timeout):
            raise TimeoutError(
                f"the simulator received {len(self._ledger.exchanges)} request(s) in "
                f"{timeout:g} s, not {count}"
            )

    def check(self) -> None:
        """Raise ``UnscriptedRequests`` if any request found no step left."""
        if self._ledger.unscripted:
            raise UnscriptedRequests("; ".join(self._ledger.unscripted))

    # -- models pointed at it ----------------------------------------------------------

    @overload
    def model(
        self, api: Literal["chat"] = "chat", *, stream: bool = False, **options: Any
    ) -> OpenAIChatModel: ...

    @overload
    def model(
        self, api: Literal["responses"], *, stream: bool = False, **options: Any
    ) -> OpenAIResponsesModel: ...

    def model(
        self, api: Literal["chat", "responses"] = "chat", *, stream: bool = False, **options: Any
    ) -> OpenAIChatModel | OpenAIResponsesModel:
        """tooldeck's OpenAI model pointed at the simulator: Chat Completions (``"chat"``)
        or the Responses API (``"responses"``).

        The SDK's own retries are off (``max_retries=0``) so each request is one step;
        ``options`` go to the model (``max_retries=2``, ``timeout=5.0``, ...).
        """
        from tooldeck.models.openai import OpenAIChatModel, OpenAIResponsesModel

        settings: dict[str, Any] = {"api_key": API_KEY, "max_retries": 0, **options}
        if api == "chat":
            return OpenAIChatModel(
                self.model_name, base_url=self.base_url, stream=stream, **settings
            )
        if api == "responses":
            return OpenAIResponsesModel(
                self.model_name, base_url=self.base_url, stream=stream, **settings
            )
        raise ValueError(f"api is 'chat' or 'responses', got {api!r}")

    # -- running -----------------------------------------------------------------------

    def start(self) -> None:
        """Listen and serve in a background thread (returns once it serves)."""
        if self._listener is not None:
            raise RuntimeError("the simulator was started already (one start per simulator)")
        # IPPROTO_TCP named, or asyncio leaves Nagle on for the accepted sockets: a body
        # written after its headers would then wait 40 ms for the client's delayed ACK.
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(self._address)
        except OSError as error:
            listener.close()
            host, port = self._address
            raise OSError(
                error.errno,
                f"the provider simulator cannot listen on {host}:{port}: {error.strerror}",
            ) from error
        listener.listen(128)
        self._listener = listener
        host, port = listener.getsockname()[:2]
        self._bound = (str(host), int(port))
        app = build_app(self.model_name, self._script, self._ledger, self._stopping)
        config = uvicorn.Config(
            app,
            lifespan="on",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=5,
        )
        _quiet_cuts()
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._serve, name=f"tooldeck-simulator-{self.root_url}", daemon=True
        )
        self._thread.start()
        if not self._stopping.ready.wait(60) or not self._thread.is_alive():
            self.stop()
            raise RuntimeError("the provider simulator did not start within 60 s")

    def _serve(self) -> None:
        assert self._server is not None
        assert self._listener is not None
        try:
            self._server.run(sockets=[self._listener])
        finally:
            self._stopping.ready.set()  # a server that failed to start wakes start() too

    def stop(self) -> None:
        """Stop serving: held requests end, the thread ends, the port is closed."""
        self._stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True
                self._thread.join(timeout=30)
        if self._listener is not None:
            self._listener.close()

    def __enter__(self) -> ProviderSimulator:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
        if kind is None and self.strict:
            self.check()

    async def __aenter__(self) -> ProviderSimulator:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)
        if kind is None and self.strict:
            self.check()


def _quiet_cuts() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(existing, QuietCuts) for existing in logger.filters):
        logger.addFilter(QuietCuts())
