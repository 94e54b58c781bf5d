"""The agent card of a served agent, made from the agent.

Its name, a description, a version, a skill per tool (unless skills are given), streaming on,
both bindings (JSON-RPC at ``/``, HTTP+JSON at ``/rest``) and the security scheme the server
enforces. A card given whole is served with its interfaces, capabilities and security made
to match what the server does: a card never promises what the server does not keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    SecurityRequirement,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

from tooldeck.run.agent import Agent
from tooldeck.serve.a2a._auth import Auth

JSONRPC_PATH = "/"
"""Where the JSON-RPC binding is served."""
REST_PATH = "/rest"
"""The prefix of the HTTP+JSON binding's routes."""
MODES = ["text/plain", "application/json"]


def skills_of(agent: Agent[Any, Any]) -> list[AgentSkill]:
    """A skill per tool of the agent: its name and description."""
    return [
        AgentSkill(
            id=spec.name,
            name=spec.name,
            description=spec.description or f"the tool {spec.name}",
            tags=["tool"],
        )
        for spec in agent.tools.specs
    ]


def make_card(
    agent: Agent[Any, Any],
    *,
    url: str,
    auth: Auth | None,
    card: AgentCard | None = None,
    description: str | None = None,
    version: str | None = None,
    skills: Sequence[AgentSkill] | None = None,
) -> AgentCard:
    """The card served at ``/.well-known/agent-card.json``.

    Args:
        agent: The agent served.
        url: Where clients reach the server (``http://host:port``, no trailing slash).
        auth: The scheme the server enforces (declared in the card), or None (open).
        card: A card to start from (its name, description, skills, provider...).
        description: What the agent does (default: a line naming the agent and its tools).
        version: The agent's version (default: tooldeck's).
        skills: The skills to show instead of one per tool.
    """
    from tooldeck._version import __version__

    base = url.rstrip("/")
    made = AgentCard()
    if card is not None:
        made.CopyFrom(card)
    if not made.name:
        made.name = agent.name
    if description is not None or not made.description:
        made.description = description or _description(agent)
    if version is not None or not made.version:
        made.version = version or __version__
    if skills is not None or not made.skills:
        del made.skills[:]
        made.skills.extend(skills if skills is not None else skills_of(agent))
    if not made.default_input_modes:
        made.default_input_modes.extend(MODES)
    if not made.default_output_modes:
        made.default_output_modes.extend(MODES)
    del made.supported_interfaces[:]
    made.supported_interfaces.extend(
        [
            AgentInterface(
                url=base + JSONRPC_PATH,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            ),
            AgentInterface(
                url=base + REST_PATH,
                protocol_binding=TransportProtocol.HTTP_JSON.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            ),
        ]
    )
    made.capabilities.CopyFrom(AgentCapabilities(streaming=True, push_notifications=False))
    made.security_schemes.clear()
    del made.security_requirements[:]
    if auth is not None:
        made.security_schemes[auth.name].CopyFrom(auth.scheme())
        made.security_requirements.append(
            SecurityRequirement(schemes={auth.name: StringList(list=[])})
        )
    return made


def _description(agent: Agent[Any, Any]) -> str:
    tools = ", ".join(agent.tools.names)
    return f"The tooldeck agent {agent.name!r}" + (f", with the tools {tools}." if tools else ".")
