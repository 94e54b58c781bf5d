"""A PNG of a ``tooldeck eval`` HTML report, as headless Chromium shows it (for the docs).

Debian's ``chromium`` driven by Playwright for Python, offline, like the report's test::

    .venv/bin/python bench/report_picture.py eval.html docs/images/eval-report.png
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("picture", type=Path)
    parser.add_argument("--height", type=int, default=1500, help="pixels of the page shown")
    args = parser.parse_args(argv)
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    from playwright.sync_api import sync_playwright

    with TemporaryDirectory() as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path="/usr/bin/chromium",
            headless=True,
            args=LAUNCH_ARGS,
            viewport={"width": 1100, "height": args.height},
        )
        context.set_offline(True)
        page = context.new_page()
        page.goto(args.report.resolve().as_uri(), wait_until="load")
        page.screenshot(path=str(args.picture))
        context.close()
    print(f"{args.picture}: {args.picture.stat().st_size:,} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
