"""``tooldeck eval``: score models' tool calling on BFCL suites and case files.

    tooldeck eval SUITE... --model M [--base-url URL] [--api-key-env NAME] [--price IN,OUT]
        [--model M2 ...]
        [--start N] [--limit N] [--ids ID,ID] [--tool-choice C] [--max-tokens N] [--jobs N]
        [--tools MODE[,MODE]] [--recall]
        [--out FILE] [--resume] [--compare FILE]... [--scorer MODULE:FUNCTION]...
        [--json] [--report FILE.html]

A SUITE is ``bfcl:CATEGORY`` (``bfcl:simple_python``, ``bfcl:irrelevance``, ...),
``bfcl:many_tools`` (BFCL's questions against one registry of every BFCL function; ``--tools``
says how it is shown, ``--recall`` measures its search alone, no model), ``tasks:chained``
(tasks that take chained or repeated calls, asked with plain calls and in code mode) or a
case file (``.jsonl``, ``.yaml``). ``--tools code`` asks a suite's cases in code mode.
``--base-url``, ``--api-key-env`` and ``--price`` belong to the ``--model`` before them.
Each case is stored as it is scored (``--out``, else a new file under
``$TOOLDECK_HOME/evals``); ``--resume`` skips the cases that file already holds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tooldeck.cli.args import EXIT_STATUSES, CliError, Parser, UsageError, positive_int, prices
from tooldeck.cli.load import load_object
from tooldeck.cli.model import build_model
from tooldeck.cli.totals import count

SUITE_HELP = (
    "bfcl:CATEGORY (e.g. bfcl:simple_python), bfcl:many_tools, tasks:chained, or a case "
    "file (.jsonl, .yaml)"
)


class _ModelOption(argparse.Action):
    """``--model`` starts a model; ``--base-url``, ``--api-key-env`` and ``--price`` set the
    latest one's."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        models: list[dict[str, Any]] = list(namespace.models or [])
        if self.dest == "model":
            models.append({"model": values, "base_url": None, "api_key_env": None, "price": None})
        elif not models:
            parser.error(f"{option_string} belongs to a --model: give the --model first")
        else:
            models[-1] = {**models[-1], self.dest: values}
        namespace.models = models


def add_eval_parser(commands: Any, parents: list[Parser]) -> None:
    """Add ``tooldeck eval`` to the command's subcommands."""
    evaluate = commands.add_parser(
        "eval",
        parents=parents,
        help="score models' tool calling on BFCL suites and your own cases",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=EXIT_STATUSES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    evaluate.add_argument("suites", nargs="*", metavar="SUITE", help=SUITE_HELP)
    evaluate.set_defaults(models=None, handler=_eval, prog="tooldeck eval")
    for flag, dest, help_text in (
        ("--model", "model", "a model to score (repeat for several; default: local)"),
        ("--base-url", "base_url", "the server of the --model before it"),
        ("--api-key-env", "api_key_env", "the variable holding the key of the --model before it"),
    ):
        evaluate.add_argument(flag, dest=dest, action=_ModelOption, help=help_text)
    evaluate.add_argument(
        "--price",
        dest="price",
        type=prices,
        metavar="IN,OUT",
        action=_ModelOption,
        help="the price of the --model before it, US dollars per million input and output "
        "tokens (e.g. 3,15): the report's costs for a server whose price is not known",
    )
    evaluate.add_argument("-m", dest="model", action=_ModelOption, help=argparse.SUPPRESS)
    _add_selection(evaluate)
    _add_outputs(evaluate)


def _add_selection(evaluate: Parser) -> None:
    evaluate.add_argument(
        "--start", type=int, default=0, help="skip this many cases of each BFCL category"
    )
    evaluate.add_argument("--limit", type=positive_int, help="cases of each BFCL category")
    evaluate.add_argument("--ids", default="", help="only these BFCL case ids (comma-separated)")
    evaluate.add_argument(
        "--tool-choice", default="auto", help="auto (default), required, none or a tool's name"
    )
    evaluate.add_argument(
        "--max-tokens", type=positive_int, default=1024, help="tokens per turn (default 1024)"
    )
    evaluate.add_argument(
        "--jobs", type=positive_int, default=1, help="cases at once per model (a local model: 1)"
    )
    evaluate.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="a case taking longer is wrong"
    )
    evaluate.add_argument(
        "--tools",
        metavar="MODE[,MODE]",
        help="how a case's tools are shown, several comma-separated: own (as they are) or "
        "code (behind code mode's run_code; cases with an answer check; tasks:chained's "
        "default is own,code); bfcl:many_tools: search (its default), all or own",
    )
    evaluate.add_argument(
        "--recall",
        action="store_true",
        help="bfcl:many_tools: the search's recall@5 for each question, without a model",
    )
    evaluate.add_argument(
        "--scorer",
        action="append",
        default=[],
        metavar="MODULE:FUNCTION",
        help="a scorer (case, result) -> float | bool; repeat for several",
    )


def _add_outputs(evaluate: Parser) -> None:
    evaluate.add_argument("--out", type=Path, help="store each scored case here (JSON lines)")
    evaluate.add_argument(
        "--resume", action="store_true", help="skip the cases --out already holds"
    )
    evaluate.add_argument(
        "--compare",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="add the results stored in FILE to the report (repeat for several)",
    )
    evaluate.add_argument("--json", action="store_true", help="print the report as JSON")
    evaluate.add_argument("--report", type=Path, metavar="FILE.html", help="write the HTML report")


def _eval(args: argparse.Namespace) -> int:
    from tooldeck.eval import EvalReport, EvalSettings, read_results

    if not args.suites and not args.compare:
        raise UsageError("name a SUITE to run, or --compare stored results")
    if args.resume and args.out is None:
        raise UsageError("--resume continues the file given with --out")
    report = EvalReport(())
    if args.recall:
        return _recall(args)
    if args.suites:
        cases = _cases(args)
        settings = EvalSettings(
            tool_choice=args.tool_choice, max_tokens=args.max_tokens, timeout_s=args.timeout
        )
        report = _run(args, cases, settings)
    for path in args.compare:
        stored = read_results(path).report
        relabelled = tuple(replace(r, model=f"{r.model} [{path.stem}]") for r in stored.results)
        report = report.merged(EvalReport(relabelled))
    if not report.results:
        raise CliError("no results to report: the stored files hold no scored case")
    _show(args, report)
    return 0


def _cases(args: argparse.Namespace) -> list[Any]:
    from tooldeck.eval import CaseFileError, UnknownSuite, load_suite

    ids = [i for i in args.ids.split(",") if i]
    try:
        cases = [
            case
            for name in args.suites
            for case in (
                load_suite(name, args.start, args.limit, ids, tools=args.tools)
                if name.startswith(("bfcl:", "tasks:"))
                else load_suite(name, tools=args.tools)  # a case file runs whole
            )
        ]
    except CaseFileError as error:
        if isinstance(error.__cause__, ImportError):  # an extra to install, not a mistake
            raise CliError(str(error)) from error
        raise UsageError(str(error)) from None  # a mistake in the file: nothing ran
    except UnknownSuite as error:
        raise UsageError(str(error)) from None
    except ValueError as error:  # a --tools mode the suite has not
        raise UsageError(str(error)) from None
    except ImportError as error:  # --tools code without its extra
        raise CliError(str(error)) from error
    if not cases:
        raise CliError("the suites hold no case to run (check --start, --limit and --ids)")
    return cases


def _recall(args: argparse.Namespace) -> int:
    """``--recall``: the search's own recall on bfcl:many_tools's questions (no model)."""
    from tooldeck.eval.bfcl.many import search_recall

    if args.suites != ["bfcl:many_tools"] or args.tools is not None:
        raise UsageError(
            "--recall measures the search of bfcl:many_tools: name it alone, no --tools"
        )
    recall = asyncio.run(search_recall(_cases(args)))
    if args.json:
        print(json.dumps(recall.to_json(), ensure_ascii=False, indent=1))
    else:
        print(
            f"search_tools (BM25) over {recall.registry:,} deferred tools, "
            "each question as the query"
        )
        print(recall.markdown())
    return 0


def _run(args: argparse.Namespace, cases: list[Any], settings: Any) -> Any:
    from tooldeck.eval import Contestant, ResultWriter, read_results, run_eval
    from tooldeck.eval.store import check_resumable

    contestants = [
        Contestant(
            build_model(m["model"], m["base_url"], m["api_key_env"]),
            m["model"],
            priced=m["base_url"] is None,
            prices=m["price"],
        )
        for m in args.models
        or [{"model": "local", "base_url": None, "api_key_env": None, "price": None}]
    ]
    _check_context(cases, contestants)
    scorers = [load_object(target, "--scorer") for target in args.scorer]
    out = args.out or _default_out()
    done: Sequence[Any] = ()
    if args.resume and out.exists():
        stored = read_results(out)
        check_resumable(stored, asdict(settings), out)
        done = stored.results
    writer = ResultWriter(out, asdict(settings), resume=args.resume)
    print(f"tooldeck eval: results go to {out}", file=sys.stderr)
    total = len(cases) * len(contestants) - len({r.key for r in done})
    kept = [len({r.key for r in done})]
    try:
        with _progress(max(0, total)) as advance:

            def scored(result: Any) -> None:
                writer.add(result)
                kept[0] += 1
                advance(result)

            run = run_eval(
                cases,
                contestants,
                settings,
                jobs=args.jobs,
                scorers=scorers,
                done=done,
                on_result=scored,
            )
            return asyncio.run(_closing(run, contestants))
    except KeyboardInterrupt:
        raise KeyboardInterrupt(_how_to_go_on(out, kept[0], args.out is None)) from None
    finally:
        writer.close()


def _check_context(cases: list[Any], contestants: Sequence[Any]) -> None:
    """Refuse cases whose tools a model's context cannot hold before the result file is
    made (``run_eval`` checks again, for a caller of the API)."""
    from tooldeck.eval.bfcl.many import check_context

    try:
        check_context(cases, [contestant.model for contestant in contestants])
    except ValueError as error:
        asyncio.run(_closing(asyncio.sleep(0), contestants))
        raise UsageError(str(error)) from None


def _how_to_go_on(out: Path, kept: int, default_out: bool) -> str:
    """What an interrupted eval kept, and the command line that goes on from it."""
    again = f"--out {shlex.quote(str(out))} --resume" if default_out else "--resume"
    return (
        f"{count(kept, 'scored case')} kept in {out}; to go on with the others, run the same "
        f"command with {again} (the cases it holds are not run again)"
    )


async def _closing(run: Any, contestants: Sequence[Any]) -> Any:
    """Await the run, then close every model (their clients, a local model's weights)."""
    try:
        return await run
    finally:
        for contestant in contestants:
            await contestant.model.aclose()


def _default_out() -> Path:
    from tooldeck.runlog import tooldeck_home

    folder = tooldeck_home() / "evals"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"eval-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}.jsonl"


def _progress(total: int) -> Any:
    from tooldeck.cli._eval_view import progress

    return progress(total)


def _show(args: argparse.Namespace, report: Any) -> None:
    from tooldeck.cli._eval_view import show_table

    if args.report is not None:
        try:
            from tooldeck.eval.html import write_report

            write_report(report, args.report)
        except ImportError as error:
            raise CliError(str(error)) from error
        print(f"tooldeck eval: report written to {args.report}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=1))
    else:
        show_table(report)
