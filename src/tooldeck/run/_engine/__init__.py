"""The engine of a run: private; nothing outside ``tooldeck`` imports it.

``loop.py`` is the only loop: ask the model (``request.py``), decide whether the turn ends
the run (``answers.py``; ``prompted.py`` where a server refuses structured output), run the
turn's calls (``calls/``), record (``state.py``), repeat. ``starting.py`` opens a run,
``handing_over.py`` drives one across handoffs, ``in_session.py`` and ``journal.py`` keep it
in a session (``recovery.py`` closes what a crash left open), ``checkpoint.py`` stores a
pause, ``once.py`` and ``records.py`` keep side effects at most once, ``spending.py`` meters
a run against its limits and budget, ``inherited.py`` carries run-level safety into handoffs
and inner runs, ``contexts.py`` builds every ``RunContext`` a run gives. The public modules
one level up (``Agent``, the options, events, limits, guardrails, capabilities...) are what
users import; they drive this package.
"""
