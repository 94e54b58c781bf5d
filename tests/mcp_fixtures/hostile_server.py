"""An MCP server by hand over stdio whose answers the SDK's client cannot read: a lone
surrogate escape in a result (valid JSON, not valid Unicode), an answer nested past the
client's JSON parser, a line of other output. Starts fast (no SDK import)."""

from __future__ import annotations

import json
import sys
from typing import Any

_NONE: dict[str, Any] = {"type": "object", "properties": {}}
_NAMES = ["surrogate", "deep", "chatty"]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


def answer(request_id: Any, name: str) -> None:
    if name == "surrogate":
        send({"id": request_id, "result": {"content": [{"type": "text", "text": "a\ud800"}]}})
    elif name == "deep":
        send({"id": request_id, "result": {"content": [], "_meta": nested(300)}})
    else:
        sys.stdout.write("a line that is not JSON-RPC\n")
        send({"id": request_id, "result": {"content": [{"type": "text", "text": "said"}]}})


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            info = {"name": "hostile", "version": "1"}
            result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": info}
            send({"id": request_id, "result": result})
        elif method == "tools/list":
            tools = [{"name": name, "inputSchema": _NONE} for name in _NAMES]
            send({"id": request_id, "result": {"tools": tools}})
        elif method == "tools/call":
            answer(request_id, message["params"]["name"])
        else:
            send({"id": request_id, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main()
