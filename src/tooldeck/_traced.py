"""An exception kept in JSON as its type's name and its message: ``TracedError`` is the
field type of a call's error in ``tooldeck.results``; read back, it is a ``RecordedError``.
May import: ``tooldeck._untrusted``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import GetCoreSchemaHandler, GetPydanticSchema
from pydantic_core import CoreSchema, core_schema

from tooldeck._untrusted import repaired

__all__ = ["RecordedError", "TracedError"]


class RecordedError(Exception):
    """An exception read back from JSON: its type's name and its message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name
        """The original exception's class name, e.g. ``KeyError``."""

    def __repr__(self) -> str:
        return f"{self.type_name}({str(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (RecordedError, (self.type_name, str(self)))


def _error_from_json(value: dict[str, Any]) -> RecordedError:
    type_name, message = value.get("type"), value.get("message")
    if not isinstance(type_name, str) or not isinstance(message, str):
        raise ValueError('expected {"type": <text>, "message": <text>}')
    return RecordedError(type_name, message)


def _error_to_json(error: BaseException | None) -> dict[str, str] | None:
    if error is None:
        return None
    name = error.type_name if isinstance(error, RecordedError) else type(error).__name__
    try:
        message = repaired(str(error))
    except Exception:  # an exception whose __str__ fails still has a type to record
        message = ""
    return {"type": name, "message": message}


def _traced_error_schema(source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
    # Left to right, so an exception or None (every trace the loop makes) is accepted without
    # calling Python code; only a dict read back from JSON goes through _error_from_json.
    from_json = core_schema.no_info_after_validator_function(
        _error_from_json, core_schema.dict_schema()
    )
    return core_schema.union_schema(
        [
            core_schema.none_schema(),
            core_schema.is_instance_schema(BaseException),
            from_json,
        ],
        mode="left_to_right",
        serialization=core_schema.plain_serializer_function_ser_schema(
            _error_to_json, when_used="json"
        ),
    )


TracedError = Annotated[BaseException | None, GetPydanticSchema(_traced_error_schema)]
"""An exception that JSON keeps as its type's name and message (a RecordedError when read)."""
