"""The HTML report of tooldeck.eval in headless Chromium (Debian's, via Playwright): it loads
offline from the file, its plots are drawn, and the case table filters."""

from __future__ import annotations

from pathlib import Path

from _chromium import offline_page
from tooldeck.eval import CaseResult, EvalReport
from tooldeck.eval.html import write_report


def result(model: str, case_id: str, category: str, correct: bool, **more: object) -> CaseResult:
    fields: dict[str, object] = {
        "reason": "" if correct else "'number': 6 is not one of [5]",
        "expected_call": category != "irrelevance",
        "made_call": True,
        "calls": 1,
        "valid_calls": 1,
        "seconds": 0.5 + len(case_id) / 10,
        "expected": [{"math.factorial": {"number": [5]}}],
        "made": [{"name": "math_factorial", "arguments": {"number": 5 if correct else 6}}],
        "text": "<script>alert('not run')</script>",
        **more,
    }
    return CaseResult(model, f"bfcl:{category}", case_id, category, correct, **fields)  # type: ignore[arg-type]


def test_the_report_loads_offline_with_its_plots_and_filters(tmp_path: Path) -> None:
    results = [
        result(model, f"{category}_{n}", category, (n + len(model)) % 3 != 0)
        for model in ("local:gemma", "openai-chat:qwen")
        for category in ("simple_python", "irrelevance")
        for n in range(6)
    ]
    path = write_report(EvalReport(tuple(results)), tmp_path / "eval.html")
    with offline_page(path.as_uri(), tmp_path / "profile") as loaded:
        page = loaded.page
        assert page.title() == "tooldeck eval"
        for plot in ("plot-accuracy", "plot-confusion", "plot-latency"):
            box = page.locator(f"#{plot} svg").bounding_box()
            assert box is not None
            assert box["width"] > 200
            assert box["height"] > 100
        legend = page.locator("#plot-accuracy svg").text_content() or ""
        assert "local:gemma" in legend
        assert "openai-chat:qwen" in legend
        assert page.locator("#plot-confusion svg text", has_text="openai-chat:qwen").count() == 1
        rows = page.locator("#cases tbody tr")
        assert rows.count() == 24
        assert page.locator("#shown").text_content() == "24 of 24 cases"
        page.select_option("#f-model", "openai-chat:qwen")
        page.select_option("#f-outcome", "failed")
        shown = page.locator("#cases tbody tr:not(.hidden)")
        failed = sum(1 for r in results if r.model == "openai-chat:qwen" and not r.correct)
        assert shown.count() == failed
        first = shown.first
        assert "math.factorial" in (first.locator("td.expected").text_content() or "")
        assert '"number": 6' in (first.locator("td.made").text_content() or "")
        page.fill("#f-text", "irrelevance_")
        assert shown.count() == sum(
            1
            for r in results
            if r.model == "openai-chat:qwen" and not r.correct and r.category == "irrelevance"
        )
        # The model's text is shown as text, never run.
        assert page.evaluate("document.querySelectorAll('tbody script').length") == 0
    assert loaded.refused == []
