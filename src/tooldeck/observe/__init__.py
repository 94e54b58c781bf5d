"""OpenTelemetry traces of agent runs, following the GenAI semantic conventions.

Off until asked: ``tooldeck.instrument()`` traces every agent, ``Agent(instrument=
Instrumentation(...))`` one. Only ``opentelemetry-api`` is needed (``pip install
'tooldeck[otel]'``); spans go to the tracer provider given, or to the global one, whose
exporter (OTLP, console, ...) the application sets up.

Layer 4: a ``RunObserver`` and ``Instrumenter`` (``tooldeck.run.observer``). May import the
layers below; the run never imports this package.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tooldeck.messages import Message
from tooldeck.models.base import Model
from tooldeck.run.observer import RunObserver, Tracing, set_default_instrumenter

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = ["Instrumentation", "instrument", "uninstrument"]

_INSTALL_HINT = "pip install 'tooldeck[otel]' (or opentelemetry-api)"


class Instrumentation(Tracing):
    """How runs become spans: where they go, and whether contents are recorded.

    Args:
        tracer_provider: The provider to get tooldeck's tracer from; None uses the global
            one (``opentelemetry.trace.set_tracer_provider``), even if it is set later.
        capture_content: Also record the prompt, the instructions, each request's messages,
            the model's output, tool arguments and tool results. Off by default: they may
            hold personal data.

    Examples:
        >>> from tooldeck.observe import Instrumentation
        >>> Instrumentation(capture_content=True).capture_content
        True
    """

    def __init__(
        self, tracer_provider: TracerProvider | None = None, *, capture_content: bool = False
    ) -> None:
        if importlib.util.find_spec("opentelemetry") is None:
            raise ImportError(f"tooldeck's tracing needs opentelemetry-api: {_INSTALL_HINT}")
        from opentelemetry import trace

        from tooldeck._version import __version__

        self.tracer_provider = tracer_provider
        self.capture_content = capture_content
        self._tracer: Tracer = trace.get_tracer(
            "tooldeck", __version__, tracer_provider=tracer_provider
        )

    def start_run(
        self, model: Model, messages: Sequence[Message], instructions: str, run_id: str
    ) -> RunObserver | None:
        """The spans of a run that starts (or resumes) now: its ``invoke_agent`` span opens.

        None when nothing would be recorded (no SDK configured, or the run not sampled): the
        run then goes unobserved, at no cost.
        """
        from tooldeck.observe._spans import RunSpans

        root = RunSpans.root_span(self._tracer, model, run_id)
        if not root.is_recording():
            root.end()
            return None
        return RunSpans(self._tracer, root, model, messages, instructions, self.capture_content)


def instrument(
    tracer_provider: TracerProvider | None = None, *, capture_content: bool = False
) -> Instrumentation:
    """Trace every agent's runs from now on (agents with ``instrument=False`` excepted).

    Returns the Instrumentation installed; ``uninstrument()`` turns it off again.
    """
    instrumentation = Instrumentation(tracer_provider, capture_content=capture_content)
    set_default_instrumenter(instrumentation)
    return instrumentation


def uninstrument() -> None:
    """Stop tracing agents that were traced by ``instrument()``."""
    set_default_instrumenter(None)
