"""What an MCP server sends -> what the model reads: tools as specs, results as text.

Text blocks are kept as they are; ``structuredContent`` becomes JSON text (it replaces the
text blocks, which by the protocol's advice repeat it); images, audio and resources are
described (kind, MIME type, size), never dropped silently.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
)

from tooldeck.messages import ToolSpec


def result_text(result: CallToolResult) -> str:
    """The observation for a ``tools/call`` result (``isError`` is the caller's concern)."""
    blocks = result.content
    if result.structured_content is not None:
        structured = json.dumps(result.structured_content, ensure_ascii=False)
        others = [describe(block) for block in blocks if block.type != "text"]
        return "\n".join([structured, *others])
    return "\n".join(describe(block) for block in blocks)


def describe(block: ContentBlock) -> str:
    """One content block as text: text as is, anything else described in one line."""

    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type}: {block.mime_type}, {_bytes(_decoded_size(block.data))}]"
    if isinstance(block, ResourceLink):
        kind = f", {block.mime_type}" if block.mime_type else ""
        return f"[resource link: {block.name} <{block.uri}>{kind}]"
    contents = block.resource
    mime = contents.mime_type or "unknown type"
    if isinstance(contents, TextResourceContents):
        size = len(contents.text.encode("utf-8"))
        return f"[resource <{contents.uri}>: {mime}, {_bytes(size)}]\n{contents.text}"
    return f"[resource <{contents.uri}>: {mime}, {_bytes(_decoded_size(contents.blob))}]"


def _decoded_size(base64_text: str) -> int:
    """Bytes that base64 text decodes to, without decoding it."""
    text = base64_text.strip()
    return len(text) * 3 // 4 - text[-2:].count("=")


def _bytes(size: int) -> str:
    return f"{size} byte" if size == 1 else f"{size} bytes"


def error_text(result: CallToolResult) -> str:
    """The server's words for a failed call (``isError``), or a line saying it gave none."""
    text = result_text(result).strip()
    return text or "the MCP tool reported an error without a message"


def tool_spec(tool: Tool) -> ToolSpec:
    """What a model is shown for an MCP tool (under the server's name): its description and
    its ``inputSchema`` as the server wrote it (a missing ``type`` is filled in as
    ``object``, which the protocol requires anyway)."""
    schema: dict[str, Any] = tool.input_schema
    if "type" not in schema:
        schema = {"type": "object", **schema}
    return ToolSpec(
        name=tool.name,
        description=tool.description or tool.title or "",
        parameters=schema,
        strict=False,
    )
