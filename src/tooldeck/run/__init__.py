"""The run: the agent (the front door), the one loop, and everything a run is made of.

``agent.py`` holds ``Agent``, whose entry points share one set of run options
(``options.py``); ``loop.py`` is the only loop: ask the model (``request.py``), decide
whether the turn ends the run (``answers.py``, ``output.py``; ``prompted.py`` where a
server refuses structured output), run the turn's calls (``calls/``), record
(``state.py``), repeat. Every stop rule is in ``policy.py``; a pause is stored by
``checkpoint.py``; what watches a run plugs in through ``observer.py``, and a store of
conversations through ``session.py``.

May import: ``tooldeck.errors``, ``tooldeck.messages``, ``tooldeck.results``,
``tooldeck._untrusted``, ``tooldeck.tools``, ``tooldeck.models``. Never the rooms above it
(sessions, runlog, observe, durable, serve, cli): they plug in through the protocols
declared here.
"""
