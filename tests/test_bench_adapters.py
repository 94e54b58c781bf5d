"""bench/adapters.py still runs (tiny counts; CI proves it works, it does not time it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "adapters.py"


def test_quick_mode_reports_every_adapter_at_both_history_lengths() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(figures) == {
        "OpenAIChatModel",
        "OpenAIResponsesModel",
        "AnthropicModel",
        "GeminiModel",
    }
    for values in figures.values():
        assert set(values) == {"1 rounds", "10 rounds"}
        assert all(value > 0 for value in values.values())
