"""The tools page: each tool the model is shown (the deferred ones last, marked), its schema
and how its calls run."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tooldeck.tools.registry import ToolEntry
from tooldeck.web._site import page, site_of


def flags(entry: ToolEntry) -> list[tuple[str, str]]:
    """(flag, what it means) for each rule of the tool that is not a default."""
    options = entry.options
    shown: list[tuple[str, str]] = []
    if options.defer_loading:
        shown.append(("deferred", "shown to the model once search_tools finds it"))
    if entry.external:
        shown.append(("external", "the application runs its calls: the page asks for results"))
    if options.requires_approval is True:
        shown.append(("approval", "every call waits for a person's decision"))
    elif options.requires_approval:
        shown.append(("approval per call", "a rule decides which calls wait for a person"))
    if options.timeout is not None:
        shown.append((f"timeout {options.timeout:g} s", "a longer call fails with tool_timeout"))
    if options.retries is not None:
        shown.append((f"retries {options.retries}", "failed calls in a row before the run stops"))
    if options.sequential:
        shown.append(("sequential", "never runs beside the turn's other calls"))
    if options.inline:
        shown.append(("inline", "runs on the event loop"))
    if options.isolation == "process":
        shown.append(("process", "each call runs in a worker process its timeout kills"))
    if not entry.spec.strict:
        shown.append(("not strict", "its schema is not in the strict form"))
    shown.extend(("toolset " + name, "a group it belongs to") for name in sorted(options.toolsets))
    return shown


def parameters(schema: dict[str, Any]) -> list[dict[str, str]]:
    """One row per top-level parameter: its name, type, default and description."""
    rows = []
    for name, value in (schema.get("properties") or {}).items():
        prop = value if isinstance(value, dict) else {}
        rows.append(
            {
                "name": name,
                "type": type_of(prop),
                "default": json.dumps(prop["default"]) if "default" in prop else "",
                "description": str(prop.get("description", "")),
            }
        )
    return rows


def type_of(prop: dict[str, Any]) -> str:
    """A JSON Schema's type in a few words: ``integer``, ``"a" | "b"``, ``array of string``."""
    if "enum" in prop:
        return " | ".join(json.dumps(choice) for choice in prop["enum"])
    if "anyOf" in prop:
        kinds = [type_of(option) for option in prop["anyOf"] if option.get("type") != "null"]
        return " or ".join(kinds) or "null"
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items")
        return f"array of {type_of(items)}" if isinstance(items, dict) else "array"
    if isinstance(kind, list):
        return " or ".join(map(str, kind))
    return str(kind) if kind else "any"


async def tools(request: Request) -> Response:
    site = site_of(request)
    entries = list(site.agent.tools.entries) if site.agent is not None else []  # deferred last
    described = [
        {"entry": entry, "flags": flags(entry), "parameters": parameters(entry.spec.parameters)}
        for entry in entries
    ]
    return page(request, "tools.html", title="Tools", tools=described, section="tools")
