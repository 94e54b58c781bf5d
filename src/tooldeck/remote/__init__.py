"""Remote agents: call an agent another team serves over A2A (the Agent2Agent protocol).

``A2AAgent(url, allowed=[...])`` reads the remote's agent card and calls it with a2a-sdk's
client: on its own (``await remote.run(prompt)``), or as a tool of an agent
(``remote.as_tool()``), where its text streams as the caller's events, its replies are
untrusted content (``after_untrusted`` guards what follows), a task that asks for input
pauses the caller's run, and a failure is ``error[remote_error]``. ``auth=BearerToken(...)``
or ``auth=ApiKey(...)`` (the schemes a tooldeck server takes) goes with every request. See
docs/a2a.md.

Layer 3, beside ``tooldeck.run``. May import: ``tooldeck.run``, ``tooldeck.tools``,
``tooldeck.models`` and the layers below; ``a2a`` (a2a-sdk) and ``httpx`` only when a remote
is first used (``pip install 'tooldeck[a2a]'``).
"""

from tooldeck.remote._pending import RemotePending
from tooldeck.remote.agent import A2AAgent, RemoteReply
from tooldeck.remote.auth import ApiKey, BearerToken

__all__ = ["A2AAgent", "ApiKey", "BearerToken", "RemotePending", "RemoteReply"]
