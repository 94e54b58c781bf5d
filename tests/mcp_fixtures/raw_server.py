"""An MCP server written by hand over stdio (JSON-RPC lines, protocol 2025-11-25), to
misbehave on purpose where the SDK's servers cannot: replies that are not MCP results,
calls never answered, a process that dies mid-call. Starts fast (no SDK import).

Tools: ``echo(text)``, ``count()`` (how many tools/call requests came before),
``grow()`` (adds a tool ``extra_N`` and sends notifications/tools/list_changed),
``fail()`` (an isError result), ``bad_result()`` (a result whose content is not a list),
``silent()`` (never answered),
``crash()`` (the process exits while the call waits).

Environment: ``RAW_ODD_TOOLS=1`` adds tools a model cannot take as they are (a dotted name,
a name that collides once mapped, a 70-character name, a broken schema);
``RAW_START_ONCE=<path>`` makes every start after the first fail (the file marks it).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

_TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
_NONE: dict[str, Any] = {"type": "object", "properties": {}}
tools: dict[str, dict[str, Any]] = {
    name: {"name": name, "description": f"The {name} tool.", "inputSchema": schema}
    for name, schema in [
        ("echo", _TEXT),
        ("count", _NONE),
        ("grow", _NONE),
        ("fail", _NONE),
        ("bad_result", _NONE),
        ("silent", _NONE),
        ("crash", _NONE),
    ]
}
if os.environ.get("RAW_ODD_TOOLS"):
    for name, schema in [
        ("odd.name", _NONE),
        ("odd_name", _NONE),
        ("x" * 70, _NONE),
        ("bad_schema", {"type": "object", "properties": {"a": {"type": "nonsense"}}}),
    ]:
        tools[name] = {"name": name, "inputSchema": schema}
calls = 0


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def call_tool(request_id: Any, params: dict[str, Any]) -> None:
    global calls
    calls += 1
    name = params.get("name")
    if name == "echo":
        send({"id": request_id, "result": text(str(params.get("arguments", {}).get("text")))})
    elif name == "count":
        send({"id": request_id, "result": text(str(calls - 1))})
    elif name == "grow":
        extra = f"extra_{len(tools)}"
        tools[extra] = {"name": extra, "description": "Added by grow.", "inputSchema": _NONE}
        send({"method": "notifications/tools/list_changed"})
        send({"id": request_id, "result": text(f"added {extra}")})
    elif name == "fail":
        send({"id": request_id, "result": {**text("the disk is full"), "isError": True}})
    elif name == "bad_result":
        send({"id": request_id, "result": {"content": "not a list of content blocks"}})
    elif name in tools and str(name).startswith("extra_"):
        send({"id": request_id, "result": text("extra")})
    elif name in ("odd.name", "odd_name"):
        send({"id": request_id, "result": text(str(name))})
    elif name == "crash":
        os._exit(3)
    elif name != "silent":
        send({"id": request_id, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})


def main() -> None:
    once = os.environ.get("RAW_START_ONCE")
    if once:
        if os.path.exists(once):
            sys.exit("raw_server: started once already")
        open(once, "w").close()
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "raw", "version": "1"},
            }
            send({"id": request_id, "result": result})
        elif method == "tools/list":
            send({"id": request_id, "result": {"tools": list(tools.values())}})
        elif method == "tools/call":
            call_tool(request_id, message.get("params", {}))
        else:
            send({"id": request_id, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main()
