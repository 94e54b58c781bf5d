"""``tooldeck eval`` as a subprocess against a scripted OpenAI-compatible server on loopback:
what it prints (table, --json, the progress bar in a terminal), the results it stores,
--resume, --compare, --report, and the errors a user reads."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from _openai_server import FakeOpenAI, Reply, chat_call, completion_body
from _pty import Terminal
from tooldeck.eval import CaseResult, read_results
from tooldeck.testing import ProviderSimulator, fail, reply

CASES = textwrap.dedent(
    """\
    - id: sum
      prompt: What is 17 plus 25?
      tools: tooldeck.cli.demo
      expect:
        calls:
          - add_numbers: {left: [17], right: [25]}
    - id: hello
      prompt: Hello, who are you?
      tools: tooldeck.cli.demo
      expect: no call
    - id: oslo
      prompt: What's the weather like in Oslo?
      tools: tooldeck.cli.demo
      expect:
        answer: {contains: "snow"}
    """
)


def replies() -> list[Reply]:
    """The server's turns for CASES, in order: a right call, a wrong call, a call and its answer."""
    add = chat_call("c1", "add_numbers", '{"left": 17, "right": 25}')
    wrong = chat_call("c2", "add_numbers", '{"left": 1, "right": 2}')
    weather = chat_call("c3", "get_weather", '{"city": "Oslo", "unit": "celsius"}')
    return [
        Reply(body=completion_body(tool_calls=[add])),
        Reply(body=completion_body(tool_calls=[wrong])),
        Reply(body=completion_body(tool_calls=[weather])),
        Reply(body=completion_body("Oslo: 4 °C, snow showers.")),
    ]


def tooldeck(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    return subprocess.run(
        [sys.executable, "-m", "tooldeck.cli", "eval", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "cases.yaml").write_text(CASES, encoding="utf-8")
    return tmp_path


def scripted(server: FakeOpenAI) -> list[str]:
    return ["--model", "openai-chat:gpt-4.1-mini", "--base-url", server.url]


def test_json_report_and_stored_results(server: FakeOpenAI, folder: Path) -> None:
    server.reply(*replies())
    done = tooldeck("cases.yaml", *scripted(server), "--json", "--out", "run.jsonl", cwd=folder)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # stdout is only the JSON: the progress went to stderr
    assert report["models"] == ["openai-chat:gpt-4.1-mini"]
    verdicts = {case["id"]: (case["correct"], case["reason"]) for case in report["cases"]}
    assert verdicts == {"sum": (True, ""), "hello": (False, "made 1 call"), "oslo": (True, "")}
    (row,) = report["summary"]
    assert (row["cases"], row["accuracy"], row["decision_accuracy"]) == (3, 2 / 3, 0.5)
    assert row["cost"] is None  # a server at --base-url is not priced as OpenAI's model
    assert (row["input_tokens"], row["output_tokens"]) == (80, 28)
    assert "results go to run.jsonl" in done.stderr
    stored = read_results(folder / "run.jsonl")
    assert [r.id for r in stored.results] == ["sum", "hello", "oslo"]
    assert stored.headers[0]["settings"]["max_tokens"] == 1024
    assert len(server.bodies) == 4


def test_resume_runs_only_the_cases_the_file_does_not_hold(
    server: FakeOpenAI, folder: Path
) -> None:
    server.reply(*replies()[:1])
    (folder / "cases.yaml").write_text(CASES.split("- id: hello")[0], encoding="utf-8")
    first = tooldeck("cases.yaml", *scripted(server), "--out", "run.jsonl", cwd=folder)
    assert first.returncode == 0, first.stderr
    (folder / "cases.yaml").write_text(CASES, encoding="utf-8")  # the file grew
    server.reply(*replies()[1:])
    again = tooldeck("cases.yaml", *scripted(server), "--out", "run.jsonl", cwd=folder)
    assert again.returncode == 1
    assert "run.jsonl exists: resume it (--resume) or write to another file" in again.stderr
    resumed = tooldeck(
        "cases.yaml", *scripted(server), "--out", "run.jsonl", "--resume", "--json", cwd=folder
    )
    assert resumed.returncode == 0, resumed.stderr
    assert len(server.bodies) == 4  # 1 + the 3 turns of the two cases not yet scored
    assert [c["id"] for c in json.loads(resumed.stdout)["cases"]] == ["sum", "hello", "oslo"]
    changed = tooldeck(
        "cases.yaml",
        *scripted(server),
        "--out",
        "run.jsonl",
        "--resume",
        "--max-tokens",
        "64",
        cwd=folder,
    )
    assert changed.returncode == 1
    assert "resume with the same settings" in changed.stderr


def test_a_case_out_of_time_closes_its_request_and_the_next_case_is_asked(
    server: FakeOpenAI, folder: Path
) -> None:
    """What a slow local server needs from ``--timeout`` (llama-cpp-python's generates on for
    a client that left; docs/code-mode.md "Measured"): every request carries --max-tokens, a
    case out of time closes its request, the next case is asked at once, the command ends."""
    (folder / "cases.yaml").write_text(CASES.split("- id: oslo")[0], encoding="utf-8")
    held = Reply(events=[(None, "unsent")], hold_after=0)  # headers, then held till it leaves
    server.reply(held, Reply(body=completion_body("I am an assistant.")))
    started = time.monotonic()
    done = tooldeck(
        "cases.yaml", *scripted(server), "--timeout", "1", "--max-tokens", "77", "--json",
        cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert server.client_left.wait(10)
    assert [body["max_tokens"] for body in server.bodies] == [77, 77]
    cases = {case["id"]: case for case in json.loads(done.stdout)["cases"]}
    assert cases["sum"]["error"] == "LimitExceeded: the run took longer than max_duration_s=1.0"
    assert (cases["sum"]["correct"], cases["hello"]["correct"]) == (False, True)
    assert time.monotonic() - started < 60


def test_the_table_compare_and_html_report(server: FakeOpenAI, folder: Path) -> None:
    server.reply(*replies())
    done = tooldeck("cases.yaml", *scripted(server), "--out", "old.jsonl", cwd=folder)
    assert done.returncode == 0, done.stderr
    for heading in ("model", "category", "accuracy", "call decision", "schema-valid"):
        assert heading in done.stdout
    assert "openai-chat:gpt-4.1-mini" in done.stdout
    assert "66.7%" in done.stdout
    compared = tooldeck("--compare", "old.jsonl", "--report", "eval.html", "--json", cwd=folder)
    assert compared.returncode == 0, compared.stderr
    assert json.loads(compared.stdout)["models"] == ["openai-chat:gpt-4.1-mini [old]"]
    page = (folder / "eval.html").read_text(encoding="utf-8")
    assert page.count("<svg") == 3
    for fetching in ('src="http', "src='http", 'href="http', "<link", "@import", "url(http"):
        assert fetching not in page  # nothing the page would fetch


def test_a_progress_bar_in_a_terminal(server: FakeOpenAI, folder: Path) -> None:
    server.reply(*replies())
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    argv = [sys.executable, "-m", "tooldeck.cli", "eval", "cases.yaml", *scripted(server)]
    terminal = Terminal([*argv, "--out", "run.jsonl"], folder, env)
    terminal.expect("3/3")
    status, shown = terminal.finish()
    assert status == 0, shown
    assert "2 right" in shown


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["bfcl:simple_pythn"], 2, "no BFCL category 'simple_pythn'"),
        (["cases.txt"], 2, "unknown suite 'cases.txt'"),
        ([], 2, "name a SUITE to run, or --compare stored results"),
        (["cases.yaml", "--base-url", "http://127.0.0.1:1/v1"], 2, "give the --model first"),
        (["cases.yaml", "--resume"], 2, "--resume continues the file given with --out"),
        (["bad.yaml"], 2, "bad.yaml, line 3, field 'expect': give exactly one of"),
        (["--compare", "broken.jsonl"], 1, "broken.jsonl, line 2: not JSON"),
        (["--compare", "other.jsonl"], 1, "other.jsonl, line 1: not a tooldeck eval result file"),
        (["--compare", "empty.jsonl"], 1, "no results to report"),
    ],
)
def test_mistakes_are_one_line_with_the_exit_status(
    folder: Path, args: list[str], status: int, message: str
) -> None:
    (folder / "bad.yaml").write_text(
        "- prompt: hi\n  tools: tooldeck.cli.demo\n  expect: {}\n", encoding="utf-8"
    )
    header = json.dumps({"format": "tooldeck-eval", "version": 1, "settings": {}})
    (folder / "broken.jsonl").write_text(f"{header}\n{{oops\n", encoding="utf-8")
    (folder / "other.jsonl").write_text('{"id": "x"}\n', encoding="utf-8")
    (folder / "empty.jsonl").write_text(header + "\n", encoding="utf-8")
    done = tooldeck(*args, cwd=folder)
    assert done.returncode == status, done
    assert done.stdout == ""
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_benchmark_script_runs_on_tooldeck_eval(server: FakeOpenAI, tmp_path: Path) -> None:
    server.reply(
        Reply(body=completion_body("No tool for that.")),
        Reply(body=completion_body(tool_calls=[chat_call("c", "calculate_triangle_area", "{}")])),
    )
    bench = Path(__file__).resolve().parents[1] / "bench" / "bfcl_eval.py"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OPENAI")},
        "OPENAI_BASE_URL": server.url,
        "OPENAI_API_KEY": "not-a-key",
    }
    command = [sys.executable, str(bench), "--model", "openai-chat:gpt-4.1-mini"]
    command += ["--category", "irrelevance", "--limit", "2", "--out", str(tmp_path / "r.jsonl")]
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "| tooldeck | irrelevance | 2 | 50.0% |" in done.stdout
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert [(r["id"], r["correct"], r["reason"]) for r in rows] == [
        ("irrelevance_0", True, ""),
        ("irrelevance_1", False, "made 1 call"),
    ]


@pytest.mark.parametrize(
    ("blocked", "args", "message"),
    [
        ("matplotlib", ["--compare", "run.jsonl", "--report", "x.html"], "matplotlib"),
        ("yaml", ["cases.yaml"], "cases.yaml: reading YAML needs PyYAML"),
    ],
)
def test_without_the_eval_extra_the_command_says_what_to_install(
    folder: Path, blocked: str, args: list[str], message: str
) -> None:
    header = json.dumps({"format": "tooldeck-eval", "version": 1, "settings": {}})
    stored = CaseResult("m", "s", "a", "c", True, "", None, False, 0, 0, 1.0).to_json()
    (folder / "run.jsonl").write_text(f"{header}\n{json.dumps(stored)}\n", encoding="utf-8")
    code = (
        f"import sys; sys.modules[{blocked!r}] = None; from tooldeck.cli.main import main; "
        f"sys.exit(main({['eval', *args]!r}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=folder, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1, done.stderr
    assert message in done.stderr
    assert 'pip install "tooldeck[eval]"' in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_ctrl_c_says_how_resume_goes_on_and_the_command_it_names_does(
    tmp_path: Path, provider: Callable[..., ProviderSimulator]
) -> None:
    """SIGINT (Ctrl-C) while the second case waits on its model: the message names the results
    file and the flags that go on from it, and that command runs only the case left."""
    (tmp_path / "cases.yaml").write_text(CASES.split("- id: oslo")[0], encoding="utf-8")
    hanging = provider([reply("3 + 4 = 42."), fail.hang()])
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    env["TOOLDECK_HOME"] = str(tmp_path / "home")
    argv = [sys.executable, "-m", "tooldeck.cli", "eval", "cases.yaml"]
    env["OPENAI_API_KEY"] = hanging.env["OPENAI_API_KEY"]  # the same for every simulator
    model = ["--model", "openai-chat:gpt-4.1-mini", "--base-url"]
    child = subprocess.Popen(
        [*argv, *model, hanging.base_url],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(hanging.requests) < 2:  # the first case scored, the second one waits
            assert child.poll() is None, child.communicate()[1]
            assert time.monotonic() < deadline, "the second case never asked its model"
            time.sleep(0.02)
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()

    assert child.returncode == 130, stderr
    (out,) = (tmp_path / "home" / "evals").glob("eval-*.jsonl")
    assert stderr.splitlines()[-1] == (
        f"tooldeck: interrupted: 1 scored case kept in {out}; to go on with the others, run "
        f"the same command with --out {out} --resume (the cases it holds are not run again)"
    )
    again = stderr.splitlines()[-1].split("the same command with ", 1)[1].split(" (", 1)[0]
    answering = provider([reply("Hello! I am an assistant.")])
    resumed = subprocess.run(
        [*argv, *model, answering.base_url, *shlex.split(again), "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert [c["id"] for c in json.loads(resumed.stdout)["cases"]] == ["sum", "hello"]
    assert len(answering.requests) == 1  # only the case the file did not hold
