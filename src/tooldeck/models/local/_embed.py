"""How well a request fits the tools, from the model's own embeddings (llama.cpp).

A second llama.cpp context on the same GGUF, in embedding mode, turns a text into the mean
of the model's last hidden states. A request's *fit* is the highest cosine similarity
between the user's message and a tool's ``name: description``: the engine reads it before
a turn whose tool choice leaves the model free (``_decide``). The context is made on
first use, and vectors are kept by their text, so a conversation pays for each tool and
each message once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tooldeck.messages import ToolSpec

_REMEMBERED = 512
"""Texts whose vectors are kept."""


class Embedder:
    """Embeddings of texts by one GGUF, through its own llama.cpp context."""

    def __init__(self, load: Callable[[], Any]) -> None:
        """``load`` makes the llama.cpp ``Llama`` in embedding mode (mean pooling)."""
        self._load = load
        self._llm: Any = None
        self._vectors: OrderedDict[str, np.ndarray[Any, Any]] = OrderedDict()

    def fit(self, request: str, tools: Sequence[ToolSpec]) -> float:
        """The best cosine similarity between ``request`` and one of ``tools``."""
        wanted = self.vector(request)
        return max(float(wanted @ self.vector(tool_text(spec))) for spec in tools)

    def vector(self, text: str) -> np.ndarray[Any, Any]:
        """``text`` as a unit vector (its start, when it is longer than the context)."""
        if text not in self._vectors:
            raw = self._loaded().embed(text or " ", truncate=True)
            vector = np.asarray(raw, dtype=np.float64)
            norm = float(np.linalg.norm(vector))
            self._vectors[text] = vector / norm if norm else vector
            while len(self._vectors) > _REMEMBERED:
                self._vectors.popitem(last=False)
        self._vectors.move_to_end(text)
        return self._vectors[text]

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None

    def _loaded(self) -> Any:
        if self._llm is None:
            self._llm = self._load()
        return self._llm


def tool_text(spec: ToolSpec) -> str:
    """What a tool is compared by: ``name: description``."""
    return f"{spec.name}: {' '.join(spec.description.split())}"
