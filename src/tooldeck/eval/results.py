"""One case run on one model, scored: ``CaseResult``, and its JSON form in stored results.

A stored result is untrusted input: ``CaseResult.from_json`` raises ``ValueError`` naming
the field that is missing or of the wrong type.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model


@dataclass(frozen=True, slots=True)
class CaseResult:
    """What one model did on one case, and how it scored."""

    model: str
    """The model's name as the report shows it."""
    suite: str
    id: str
    category: str
    correct: bool
    """Right by BFCL's rules (a turn with a call whose arguments do not parse made no call),
    or by the case's answer or output check."""
    reason: str
    """Why it is wrong ("" when right)."""
    expected_call: bool | None
    """Whether the first turn should have called a tool (None: the case does not say)."""
    made_call: bool
    """Whether the first turn called a tool."""
    calls: int
    """Calls the first turn made."""
    valid_calls: int
    """Of those, calls of a known tool whose arguments its schema accepts."""
    seconds: float
    """Wall time of the run (the first turn, or the whole run for an answer check)."""
    strict: bool | None = None
    """Right by the stricter rule, where it differs: every call made counts, and one whose
    arguments do not parse is wrong."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    requests: int | None = None
    """Model requests the case took (with tool search: its searches and its call)."""
    tool_calls: int | None = None
    """Calls of the case's tools that ran, each call of a code-mode program counted (its
    ``run_code`` not); None in results stored before they were counted."""
    cost: float | None = None
    """US dollars, when the model's prices are known."""
    expected: list[Any] = field(default_factory=list)
    """The expected calls in BFCL's form, or the expected answer or output as text."""
    made: list[dict[str, Any]] = field(default_factory=list)
    """The calls as the model made them: ``{"name", "arguments"}`` (the raw text when the
    arguments did not parse); the name is the tool's, which may differ from the expected
    call's (BFCL's ``math.factorial`` is the tool ``math_factorial``)."""
    text: str = ""
    """The answer, or what the model wrote beside its calls."""
    error: str = ""
    """A failure that ended the run (the model's error), "" when none."""
    signals: dict[str, float] = field(default_factory=dict)
    """What the model reported about its decision (a local model's ``fit`` and
    ``call_score``)."""
    scores: dict[str, float] = field(default_factory=dict)
    """The user's scorers, by name: 0 to 1."""

    @property
    def key(self) -> tuple[str, str, str]:
        """(model, suite, id): one result per key in a stored run."""
        return self.model, self.suite, self.id

    @property
    def strictly_correct(self) -> bool:
        return self.correct if self.strict is None else self.strict

    @property
    def decision_correct(self) -> bool | None:
        """Whether the first turn called exactly when it should (None: the case does not say)."""
        return None if self.expected_call is None else self.expected_call == self.made_call

    def to_json(self) -> dict[str, Any]:
        """The result as JSON values (what a result file stores)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> CaseResult:
        """A result as stored; ``ValueError`` names the field that is wrong."""
        try:
            stored = _StoredResult.model_validate(data)
        except ValidationError as error:
            first = error.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"]) or "the record"
            raise ValueError(f"{where}: {first['msg']}") from None
        return cls(**stored.model_dump())


def _stored_form() -> type[BaseModel]:
    """The checked form of a stored ``CaseResult``: its fields, types and defaults, strictly
    typed, and nothing else (made from the dataclass, so the two never differ)."""
    hints = get_type_hints(CaseResult)
    fields: dict[str, Any] = {}
    for spec in dataclasses.fields(CaseResult):
        if spec.default is not dataclasses.MISSING:
            fields[spec.name] = (hints[spec.name], spec.default)
        elif spec.default_factory is not dataclasses.MISSING:
            fields[spec.name] = (hints[spec.name], Field(default_factory=spec.default_factory))
        else:
            fields[spec.name] = (hints[spec.name], ...)
    config = ConfigDict(extra="forbid", strict=True)
    return create_model("_StoredResult", __config__=config, __doc__=_stored_form.__doc__, **fields)


_StoredResult = _stored_form()
