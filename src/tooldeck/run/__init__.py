"""The run: what users import to build and drive agents, over a private engine.

The public modules: ``agent.py`` (``Agent``, ``run_agent``), whose entry points share one set
of run options (``options.py``); ``capabilities.py`` (the one extension point); the limits
and budgets of a run (``policy.py``, ``budget.py``); its events (``events.py``) and handle
(``handle.py``, ``cancel.py``); what may shape a run — guardrails, the untrusted-content
policy, history strategies, middleware, typed output, handoffs and agent tools; and the
protocols that the rooms above plug in through (``session.py``, ``observer.py``).
``module_settings.py`` reads an agent module's settings for every door.

``_engine/`` is the engine those drive (the loop, its requests, calls and records): private.

May import: ``tooldeck.errors``, ``tooldeck.messages``, ``tooldeck.results``,
``tooldeck._untrusted``, ``tooldeck._budget``, ``tooldeck.tools``, ``tooldeck.models``.
Never the rooms above it (sessions, runlog, observe, durable, serve, cli): they plug in
through the protocols declared here.
"""
