"""Simulator scripts from files (``python -m tooldeck.testing serve``): what a good script
becomes, and the ScriptError a bad one gets, naming the file, the step and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldeck.errors import ToolDeckError
from tooldeck.testing import call, fail, reply
from tooldeck.testing.request import SimMessage, SimRequest
from tooldeck.testing.script import ScriptError, load_script, read_script

FULL = """{
  "model": "gpt-4.1-nano",
  "steps": [
    {"call": "refund_order", "arguments": {"order_id": "A1"}},
    {"calls": [{"name": "lookup", "arguments": {"id": 1}},
               {"name": "lookup", "arguments": "{\\"id\\": 2}"}], "text": "Checking."},
    {"fail": "status", "status": 429, "retry_after": 1},
    {"fail": "hang"},
    {"fail": "cut_stream", "after_chunks": 2, "answer": {"call": "lookup"}},
    {"fail": "slow_first_byte", "seconds": 2.5, "answer": {"reply": "Late."}},
    {"reply": "Refunded."}
  ],
  "rules": [
    {"when": {"last_user_contains": "refund"}, "then": {"reply": "on it"}, "times": 1},
    {"when": {"after_tool": "lookup"}, "then": [{"reply": "a"}, {"reply": "b"}]}
  ]
}"""


def write(tmp_path: Path, text: str, name: str = "script.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def request_saying(text: str) -> SimRequest:
    return SimRequest(1, "chat", "/v1/chat/completions", {}, {}, (SimMessage("user", text),))


def test_a_full_script_reads_as_the_same_steps_as_python(tmp_path: Path) -> None:
    script = load_script(write(tmp_path, FULL))
    assert script.model == "gpt-4.1-nano"
    assert script.steps == (
        call("refund_order", {"order_id": "A1"}),
        call(("lookup", {"id": 1}), ("lookup", '{"id": 2}'), text="Checking."),
        fail.status(429, retry_after=1),
        fail.hang(),
        fail.cut_stream(2, answer=call("lookup", {})),
        fail.slow_first_byte(2.5, answer=reply("Late.")),
        reply("Refunded."),
    )
    first, second = script.rules
    assert first.times == 1
    assert first.when(request_saying("Please refund me"))
    assert not first.when(request_saying("hello"))
    assert second.then == (reply("a"), reply("b"))


def test_a_yaml_script_and_a_bare_list(tmp_path: Path) -> None:
    path = write(tmp_path, "- reply: hi\n- fail: status\n  status: 500\n", "script.yaml")
    script = load_script(path)
    assert script.steps == (reply("hi"), fail.status(500))
    assert script.rules == ()
    assert script.model == "gpt-4.1-mini"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[{"reply": "ok"}, {"fail": "cut_stream", "after_chunks": "two"}]',
            "step 2: field 'after_chunks': Input should be a valid integer, got 'two'",
        ),
        (
            '[{"reply": "ok", "call": "x"}]',
            "step 1: a step has one of 'reply', 'call', 'calls' or 'fail', got 'reply', 'call'",
        ),
        (
            '[{"answer": "ok"}]',
            "step 1: a step has one of 'reply', 'call', 'calls' or 'fail', got 'answer'",
        ),
        ('["ok"]', 'step 1: a step is an object such as {"reply": "..."}, got \'ok\''),
        (
            '[{"reply": "ok", "delay": 1}]',
            "step 1: field 'delay': Extra inputs are not permitted, got 1",
        ),
        (
            '[{"fail": "hangs"}]',
            "step 1: field 'fail': one of 'status', 'hang', 'cut_stream', 'slow_first_byte', "
            "got 'hangs'",
        ),
        ('[{"fail": "status"}]', "step 1: field 'status': Field required"),
        (
            '[{"fail": "status", "status": 200}]',
            "step 1: fail.status() takes an HTTP error status (400-599), got 200",
        ),
        (
            '[{"call": "lookup", "arguments": [1]}]',
            "step 1: field 'arguments': an object, or JSON text (a string), got [1]",
        ),
        ('[{"calls": []}]', "step 1: field 'calls': List should have at least 1 item"),
        (
            '[{"calls": [{"name": "a"}, {"arguments": {}}]}]',
            "step 1: field 'calls.1.name': Field required",
        ),
        (
            '[{"fail": "slow_first_byte", "seconds": 1, "answer": {"fail": "hang"}}]',
            "step 1, answer: a reply, a call or calls, not a failure",
        ),
        (
            '{"steps": [], "rules": [{"when": {"last_user_contains": "a", "after_tool": "b"}, '
            '"then": {"reply": "x"}}]}',
            "rule 1, when: one of 'last_user_contains', 'last_tool_result_contains' or "
            "'after_tool', got 2",
        ),
        (
            '{"rules": [{"when": {"after_tool": "b"}, "then": [{"reply": "x"}, {"nope": 1}]}]}',
            "rule 1, then 2: a step has one of 'reply', 'call', 'calls' or 'fail', got 'nope'",
        ),
        (
            '{"rules": [{"when": {"after_tool": "b"}, "then": [{"reply": "x"}], "times": 2}]}',
            "rule 1: rule(times=...) goes with one step; a list answers once per step",
        ),
        ('{"step": [{"reply": "x"}]}', "the script: field 'step': Extra inputs are not permitted"),
        ('{"steps": []}', "the script has no steps and no rules"),
        ('"reply"', "a script is a list of steps or an object with 'steps', got str"),
    ],
)
def test_a_bad_script_is_an_error_naming_the_step_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ScriptError) as raised:
        load_script(write(tmp_path, text))
    assert str(raised.value).startswith(f"{tmp_path / 'script.json'}: {message}")
    assert raised.value.source == str(tmp_path / "script.json")


def test_script_errors_are_tooldeck_errors_pointing_at_the_docs() -> None:
    with pytest.raises(ToolDeckError) as raised:
        read_script([{"reply": 1}], "inline")
    assert isinstance(raised.value, ValueError)
    assert (
        str(raised.value) == "inline: step 1: field 'reply': Input should be a valid string, got 1"
    )
    assert raised.value.where == "step 1"  # type: ignore[attr-defined]
    assert "see the documentation: docs/testing.md#a-script-in-a-file" in (
        raised.value.__notes__ or []
    )


def test_a_file_that_is_not_json_says_where(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"script.json: line 2, column 1: not JSON"):
        load_script(write(tmp_path, '[{"reply": "ok"},\n]'))


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_bytes(b'[{"reply": "caf\xe9"}]')
    with pytest.raises(ScriptError, match=r"script.json: not UTF-8 text \(byte 15\)"):
        load_script(path)


def test_yaml_aliases_are_refused_before_they_expand(tmp_path: Path) -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    with pytest.raises(ScriptError, match=r"script.yaml: line 2: not YAML: aliases \(\*name\)"):
        load_script(write(tmp_path, laughs, "script.yaml"))


@pytest.mark.parametrize("name", ["script.json", "script.yaml"])
def test_deep_nesting_is_an_error_not_a_crash(tmp_path: Path, name: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(ScriptError, match="nested"):
        load_script(write(tmp_path, deep, name))
    shallow_but_deep = '[{"call": "a", "arguments": ' + '{"x": ' * 40 + "1" + "}" * 40 + "}]"
    with pytest.raises(ScriptError, match="nested more than 32 deep"):
        load_script(write(tmp_path, shallow_but_deep, "deep.json"))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"nothing\.json: cannot read the script"):
        load_script(tmp_path / "nothing.json")
