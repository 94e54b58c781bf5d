"""How a tool runs, declared once: ``ToolOptions`` is what every kind of tool entry carries.

``@tool(...)`` and ``FunctionTool(...)`` take the same keywords (``ToolOptionArgs``); the
registry entry references the resulting ToolOptions instead of copying its fields.
"""

from __future__ import annotations

import difflib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from tooldeck.errors import ToolDefinitionError
from tooldeck.messages import ToolResult
from tooldeck.tools.context import RunContext
from tooldeck.tools.guardrails import ArgumentsCheck, ToolGuardrail
from tooldeck.tools.outputs import LARGE_OUTPUTS, LargeOutput

ErrorHandler = Callable[[Exception], str] | Literal["raise"]
"""Turns a tool's exception into the text the model reads, or ``"raise"`` to end the run."""

ApprovalPredicate = Callable[[RunContext[Any], dict[str, Any]], bool | Awaitable[bool]]
"""Decides per call whether a person must approve it, from the validated arguments."""

RequiresApproval = bool | ApprovalPredicate
"""``True``: every call waits for a decision; a predicate: the calls it returns True for."""

Reconcile = Callable[[RunContext[Any]], ToolResult | Awaitable[ToolResult | None] | None]
"""Asks the outside world whether an interrupted call of a ``side_effects`` tool happened:
its result if it did, None if it did not (the call then runs)."""

Trust = Literal["trusted", "untrusted"]
"""Where a tool's results come from: content the application vouches for, or not."""

Isolation = Literal["thread", "process"]
"""Where a sync function runs: a worker thread (cheap; cannot be stopped, so a call past its
timeout is abandoned and may still finish), or a worker process of its own (a fork per call,
milliseconds; killed at its timeout, so nothing more of it happens)."""


class ToolOptionArgs(TypedDict, total=False):
    """The keyword options ``@tool`` and ``FunctionTool`` accept (see ToolOptions)."""

    toolsets: Iterable[str]
    timeout: float | None
    retries: int | None
    sequential: bool
    inline: bool
    on_error: ErrorHandler | None
    requires_approval: RequiresApproval
    isolation: Isolation
    max_calls: int | None
    max_concurrency: int | None
    max_output_chars: int | None
    large_output: LargeOutput | None
    side_effects: bool
    reconcile: Reconcile | None
    guardrails: Iterable[ToolGuardrail | ArgumentsCheck]
    trust: Trust
    sensitive: bool
    defer_loading: bool


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """The rules one tool runs by; the defaults suit most tools."""

    toolsets: frozenset[str] = frozenset()
    """Named groups this tool belongs to, for ``registry.view(toolsets=...)``."""
    timeout: float | None = None
    """Seconds a call may take before it fails with ``tool_timeout``."""
    retries: int | None = None
    """Consecutive failed calls allowed before the run stops; None uses the agent's limit."""
    sequential: bool = False
    """Never run beside the other calls of a turn."""
    inline: bool = False
    """Run a sync function on the event loop instead of a worker thread."""
    on_error: ErrorHandler | None = None
    """Turns the tool's exception into the model's text, or ``"raise"`` to end the run."""
    requires_approval: RequiresApproval = False
    """Pause the run for a person's decision before a call runs (every call, or per call)."""
    isolation: Isolation = "thread"
    """``"process"`` runs a sync function in a worker process that its timeout kills."""
    max_calls: int | None = None
    """Calls of this tool one run may make; the calls past it are answered as not run
    (``call_limit``), and the run goes on."""
    max_concurrency: int | None = None
    """Calls of this tool that may run at once across every run in the process (a slot is
    waited for, within the tool's timeout)."""
    max_output_chars: int | None = None
    """Characters of output the model reads whole; a longer one is handled as
    ``large_output`` says (None: the agent's ``max_output_chars``)."""
    large_output: LargeOutput | None = None
    """``"truncate"``, ``"store"`` (the head, the size and a handle for ``read_output``) or
    ``"error"`` (None: the agent's ``large_output``)."""
    side_effects: bool = False
    """Marks a call that must not run twice (at-most-once; see run control)."""
    reconcile: Reconcile | None = None
    """For a ``side_effects`` call that started but never reported (its process died):
    ``fn(ctx) -> ToolResult | None`` says whether it happened (None: it did not, so it runs);
    without it the model reads ``error[interrupted]``."""
    guardrails: tuple[ToolGuardrail, ...] = ()
    """Checks on each call's validated arguments (before approval) and on its result."""
    trust: Trust = "trusted"
    """``"untrusted"``: its results come from the outside world (a web page, an e-mail)."""
    sensitive: bool = False
    """Its calls reach what must not leak (see ``Agent(after_untrusted=...)``)."""
    defer_loading: bool = False
    """Not shown to the model until a search reveals it (``ToolSearch``): a call before
    that is answered ``error[unknown_tool]`` with a hint to use ``search_tools``."""

    @classmethod
    def of(
        cls,
        name: str,
        args: ToolOptionArgs,
        *,
        is_async: bool = False,
        keywords: Iterable[str] = (),
    ) -> ToolOptions:
        """Options from keyword arguments, checked; ``name`` is the tool's, for messages;
        ``is_async`` says the function is a coroutine function; ``keywords`` are the
        caller's own keyword parameters, named beside the options when one is unknown."""
        known = tuple(ToolOptionArgs.__annotations__)
        refuse_unknown_options(f"tool {name!r}", args, (*keywords, *known))
        options = cls(
            toolsets=frozenset(args.get("toolsets", ())),
            timeout=args.get("timeout"),
            retries=args.get("retries"),
            sequential=args.get("sequential", False),
            inline=args.get("inline", False),
            on_error=args.get("on_error"),
            requires_approval=args.get("requires_approval", False),
            isolation=args.get("isolation", "thread"),
            max_calls=args.get("max_calls"),
            max_concurrency=args.get("max_concurrency"),
            max_output_chars=args.get("max_output_chars"),
            large_output=args.get("large_output"),
            side_effects=args.get("side_effects", False),
            reconcile=args.get("reconcile"),
            guardrails=tuple(
                ToolGuardrail.of(item, f"tool {name!r}") for item in args.get("guardrails", ())
            ),
            trust=args.get("trust", "trusted"),
            sensitive=args.get("sensitive", False),
            defer_loading=args.get("defer_loading", False),
        )
        options.check(name, is_async=is_async)
        return options

    def check(self, name: str, *, is_async: bool = False) -> None:
        """Refuse values that cannot work, naming the tool and the option."""
        self._check_isolation(name, is_async)
        if self.timeout is not None and self.timeout <= 0:
            raise ToolDefinitionError(
                f"tool {name!r}: timeout must be positive, got {self.timeout!r}"
            )
        counts = {
            "max_calls": self.max_calls,
            "max_concurrency": self.max_concurrency,
            "max_output_chars": self.max_output_chars,
        }
        for option, value in counts.items():
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ToolDefinitionError(
                    f"tool {name!r}: {option} must be a whole number of at least 1, got {value!r}"
                )
        if self.large_output is not None and self.large_output not in LARGE_OUTPUTS:
            raise ToolDefinitionError(
                f"tool {name!r}: large_output must be 'truncate', 'store' or 'error', got "
                f"{self.large_output!r}"
            )
        self._check_side_effects(name)
        if self.retries is not None and self.retries < 0:
            raise ToolDefinitionError(f"tool {name!r}: retries must be >= 0, got {self.retries!r}")
        approval = self.requires_approval
        if not isinstance(approval, bool) and not callable(approval):
            raise ToolDefinitionError(
                f"tool {name!r}: requires_approval must be True, False or a function "
                f"(ctx, arguments) -> bool, got {approval!r}"
            )
        if self.trust not in ("trusted", "untrusted"):
            raise ToolDefinitionError(
                f"tool {name!r}: trust must be 'trusted' or 'untrusted', got {self.trust!r}"
            )
        if not isinstance(self.defer_loading, bool):
            raise ToolDefinitionError(
                f"tool {name!r}: defer_loading must be True or False, got {self.defer_loading!r}"
            )
        on_error = self.on_error
        if on_error is not None and on_error != "raise" and not callable(on_error):
            raise ToolDefinitionError(
                f"tool {name!r}: on_error must be a function (exception) -> str or 'raise', "
                f"got {on_error!r}"
            )

    def _check_side_effects(self, name: str) -> None:
        if not isinstance(self.side_effects, bool):
            raise ToolDefinitionError(
                f"tool {name!r}: side_effects must be True or False, got {self.side_effects!r}"
            )
        if self.reconcile is None:
            return
        if not callable(self.reconcile):
            raise ToolDefinitionError(
                f"tool {name!r}: reconcile must be a function (ctx) -> ToolResult | None, got "
                f"{self.reconcile!r}"
            )
        if not self.side_effects:
            raise ToolDefinitionError(
                f"tool {name!r}: reconcile= is only used by a tool with side_effects=True "
                "(its calls are recorded, so an interrupted one can be reconciled); add "
                "side_effects=True"
            )

    def _check_isolation(self, name: str, is_async: bool) -> None:
        if self.isolation == "thread":
            return
        if self.isolation != "process":
            raise ToolDefinitionError(
                f"tool {name!r}: isolation must be 'thread' or 'process', got {self.isolation!r}"
            )
        if is_async or self.inline:
            what = (
                "an async function (cancelled at its timeout already)"
                if is_async
                else ("inline=True (it runs on the event loop)")
            )
            raise ToolDefinitionError(
                f"tool {name!r}: isolation='process' runs a sync function in a worker process; "
                f"it cannot apply to {what}"
            )
        from tooldeck.tools._process import fork_context

        if fork_context() is None:
            raise ToolDefinitionError(
                f"tool {name!r}: isolation='process' needs os.fork (Linux, macOS), which this "
                "platform lacks"
            )


def refuse_unknown_options(where: str, given: Iterable[str], known: Iterable[str]) -> None:
    """Raise ToolDefinitionError for a keyword that is no option (a typo of ``timeout`` must
    not pass silently), naming it, the closest option, and every option there is."""
    names = sorted(set(known))
    unknown = [option for option in given if option not in names]
    if not unknown:
        return
    described = []
    for option in unknown:
        close = difflib.get_close_matches(option, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        described.append(f"{option!r}{hint}")
    plural = "s" if len(unknown) > 1 else ""
    raise ToolDefinitionError(
        f"{where}: unknown option{plural} {' and '.join(described)}; the options are: "
        + ", ".join(names)
    )


DEFAULT_OPTIONS = ToolOptions()
