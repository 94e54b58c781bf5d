"""What every ``tooldeck`` command shares: its error kinds, exit statuses and common options.

A usage error (bad arguments, found before anything runs) is one line on stderr and exit
status 2, whether argparse or a command finds it; any other failure is one line and 1.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable
from typing import Any, NoReturn

from tooldeck.models.prices import ModelPrices

EXIT_ANSWER = 0
EXIT_STOPPED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

EXIT_STATUSES = """\
exit status:
  0    the model answered
  1    the run stopped without an answer (a limit, even with --on-limit final-answer when
       no last answer could be had; a model error), or something failed
  2    usage error: the arguments are wrong (nothing was run)
  130  interrupted (Ctrl-C)"""

ENVIRONMENT = """\
environment variables:
  OPENAI_API_KEY, OPENAI_BASE_URL      openai:... and openai-chat:... models
  AZURE_OPENAI_API_KEY, AZURE_OPENAI_ENDPOINT, OPENAI_API_VERSION
                                       azure:... models
  ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
                                       anthropic:... models
  GEMINI_API_KEY (or GOOGLE_API_KEY)   gemini:... models
  TOOLDECK_HOME                        where conversations are kept (sessions.db); default
                                       the user's data directory, ~/.local/share/tooldeck
  --base-url URL and --api-key-env NAME override them for one command; a key is never
  given on the command line."""


class CliError(Exception):
    """A failure to report as one line, without a traceback (exit status 1)."""


class UsageError(Exception):
    """Arguments that cannot work, found before anything ran (exit status 2)."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors that point at ``--help``, and no abbreviations
    (``--api-key sk-...`` must not pass for ``--api-key-env``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Exit with the usage status and one line naming the error and ``--help``."""
        self.exit(EXIT_USAGE, usage_line(self.prog, message))


def usage_line(prog: str, message: str) -> str:
    """The one line a usage error prints: ``prog: error: message (see prog --help)``."""
    return f"{prog}: error: {message} (see {prog} --help)\n"


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    return _whole(text, 1)


def whole_number(text: str) -> int:
    """An argparse type: a whole number of at least 0."""
    return _whole(text, 0)


def _whole(text: str, least: int) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if number < least:
        wanted = "at least 1" if least == 1 else f"{least} or more"
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {number}")
    return number


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0 (``1.5``)."""
    return _above_zero(
        text, text, "expected seconds, e.g. 90", "must be a number of seconds above 0"
    )


def dollars(text: str) -> float:
    """An argparse type: US dollars, more than 0 (``0.50``, ``$2``)."""
    return _above_zero(
        text,
        text.removeprefix("$"),
        "expected US dollars (e.g. 0.50)",
        "must be more than 0 dollars",
    )


def _above_zero(text: str, number: str, expected: str, too_small: str) -> float:
    """``number`` (the number part of ``text``) as a finite float above 0; otherwise an
    ArgumentTypeError that quotes ``text`` after ``expected`` (not a number) or ``too_small``."""
    try:
        value = float(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{expected}, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{too_small}, got {text!r}")
    return value


def prices(text: str) -> ModelPrices:
    """An argparse type: ``IN,OUT``, US dollars per million input and output tokens
    (``3,15``; ``0,0`` for a model that costs nothing)."""
    shape = "expected IN,OUT: US dollars per million input and output tokens, e.g. 3,15"
    parts = text.split(",")
    try:
        numbers = [float(part.strip().removeprefix("$")) for part in parts]
    except ValueError:
        numbers = []
    if len(numbers) != 2 or len(parts) != 2:
        raise argparse.ArgumentTypeError(f"{shape}; got {text!r}")
    if not all(0 <= number < float("inf") for number in numbers):
        raise argparse.ArgumentTypeError(f"{shape}, each 0 or more; got {text!r}")
    return ModelPrices(input_per_million=numbers[0], output_per_million=numbers[1])


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for a close name, else the names there are."""
    names = sorted(known)
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; the tools are: {', '.join(names)}" if names else ""


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_env_name(text: str) -> bool:
    """Whether ``text`` can name an environment variable (``--api-key-env NAME``)."""
    return _ENV_NAME.fullmatch(text) is not None


def verbose_options() -> Parser:
    """``-v/--verbose``, for every command (a parent parser)."""
    parent = Parser(add_help=False)
    parent.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show tracebacks: a tool's exception, a module that fails to import",
    )
    return parent


class _RefuseKey(argparse.Action):
    """``--api-key``: refused, without repeating the key (use ``--api-key-env NAME``)."""

    def __call__(
        self, parser: argparse.ArgumentParser, *args: object, **kwargs: object
    ) -> NoReturn:
        parser.error(
            "a key is never given on the command line (the shell's history and the process "
            "list keep it): put it in an environment variable and name that with "
            "--api-key-env NAME"
        )


def model_options() -> Parser:
    """``--model``, ``--base-url``, ``--api-key-env`` and ``--price`` (a parent parser)."""
    parent = Parser(add_help=False)
    parent.add_argument(
        "-m", "--model", default="local", help="model string (default: local), e.g. openai:gpt-4.1"
    )
    parent.add_argument(
        "--base-url",
        metavar="URL",
        help="an OpenAI-, Anthropic- or Gemini-compatible server, e.g. http://127.0.0.1:8000/v1",
    )
    parent.add_argument("--api-key", action=_RefuseKey, help=argparse.SUPPRESS)
    parent.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="read the API key from the environment variable NAME (never give a key itself)",
    )
    parent.add_argument(
        "--price",
        type=prices,
        metavar="IN,OUT",
        help="the model's price in US dollars per million input and output tokens (e.g. "
        "3,15): costs and --max-cost count with it, for a server whose price is not known",
    )
    return parent
