"""Running one turn's tool calls: every model mistake becomes an observation, never a crash.

May import what ``tooldeck.run`` may, and the run's own modules below the loop.
"""
