"""``python -m tooldeck.testing serve SCRIPT [--port N] [--url-file FILE]``: a provider
simulator serving a script file until SIGINT or SIGTERM.

The base URL (``http://127.0.0.1:PORT/v1``) is the first line printed, or written to
``--url-file`` (whole, at once: a reader never sees half of it). What each request was
answered with goes to stderr, one line each.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from tooldeck.testing.script import ScriptError, load_script
from tooldeck.testing.simulator import ProviderSimulator


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        script = load_script(args.script)
    except ScriptError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    simulator = ProviderSimulator(
        script.steps,
        rules=script.rules,
        model=args.model or script.model,
        host=args.host,
        port=args.port,
        strict=False,
        on_exchange=lambda exchange: print(exchange.describe(), file=sys.stderr, flush=True),
    )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        simulator.start()
    except OSError as error:
        print(f"error: {error.strerror or error}", file=sys.stderr)
        return 1
    try:
        _announce(simulator.base_url, args.url_file)
        stop.wait()
    finally:
        simulator.stop()
    _summary(simulator)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tooldeck.testing",
        description="A provider simulator: an OpenAI-compatible server on loopback.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve a script (JSON or YAML) until stopped")
    serve.add_argument("script", help="the script: a list of steps (see docs/testing.md)")
    serve.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    serve.add_argument("--host", default="127.0.0.1", help="the address (default: 127.0.0.1)")
    serve.add_argument("--model", help="the model name to report (default: the script's)")
    serve.add_argument(
        "--url-file", type=Path, help="write the base URL to this file instead of stdout"
    )
    return parser


def _announce(base_url: str, url_file: Path | None) -> None:
    if url_file is None:
        print(base_url, flush=True)
        return
    partial = url_file.with_name(url_file.name + ".partial")
    partial.write_text(base_url + "\n", encoding="utf-8")
    os.replace(partial, url_file)


def _summary(simulator: ProviderSimulator) -> None:
    served = len(simulator.exchanges)
    print(f"served {served} request(s); {simulator.steps_left} step(s) left", file=sys.stderr)
    for problem in simulator.unscripted:
        print(f"unscripted: {problem}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
