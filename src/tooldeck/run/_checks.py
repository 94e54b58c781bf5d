"""The checks of ``Agent(...)``'s settings, with what to write instead."""

from __future__ import annotations

import warnings
from typing import Literal

from tooldeck.run.history import HistoryStrategy
from tooldeck.run.observer import Instrumenter


def instrumenter(instrument: Instrumenter | bool | None) -> Instrumenter | Literal[False] | None:
    if instrument is True:
        raise ValueError(
            "instrument=True is not a setting: pass tooldeck.observe.Instrumentation() "
            "(the global tracer provider) or call tooldeck.instrument() for every agent"
        )
    return instrument


def check_settings(
    on_limit: object, max_concurrency: int | None, checkpoint_key: object, after_untrusted: object
) -> None:
    if after_untrusted not in ("allow", "ask", "refuse"):
        raise ValueError(
            f"after_untrusted must be 'allow', 'ask' or 'refuse', got {after_untrusted!r}"
        )
    if on_limit not in ("raise", "final_answer"):
        raise ValueError(f"on_limit must be 'raise' or 'final_answer', got {on_limit!r}")
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
    if checkpoint_key is not None and not isinstance(checkpoint_key, bytes):
        raise TypeError(f"checkpoint_key must be bytes, got {type(checkpoint_key).__name__}")


def strategy(
    strategy: HistoryStrategy | None, old_name: HistoryStrategy | None
) -> HistoryStrategy | None:
    if old_name is not None:
        warnings.warn(
            "Agent(history=...) is now Agent(history_strategy=...): run(history=...) is the "
            "history a run starts from",
            DeprecationWarning,
            stacklevel=3,
        )
        if strategy is not None:
            raise TypeError("pass history_strategy= only (history= is its deprecated name)")
        strategy = old_name
    if strategy is not None and not isinstance(strategy, HistoryStrategy):
        raise TypeError(
            "history_strategy must be a history strategy such as KeepLastExchanges(10), got "
            f"{strategy!r} (a run's earlier messages go to run(..., history=...))"
        )
    return strategy
