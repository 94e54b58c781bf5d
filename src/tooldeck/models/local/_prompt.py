"""The prompt a local model reads, and the parsing of what it writes.

Two formats, one set of rules. The model is shown its tools (name, description, JSON Schema
of the arguments), the two shapes a turn can take (``answer <text>`` or ``call {...}``
lines, which the grammar in ``_grammar`` enforces) and a worked example of a call, a
tool result and a final answer.

- ``TranscriptFormat`` (tooldeck's own, for GGUFs without a chat template, such as the
  default Gemma 3 270M base model): a plain transcript of ``user:``, ``assistant:`` and
  ``tool:`` lines after the rules, ending with ``assistant:`` for the model to continue. The
  prompt stops before the space after the colon: tokenizers join that space with the next
  word (`` call``, `` answer``), so a prompt ending in a lone space asks the model for a
  token sequence it has rarely seen.
- ``TemplateFormat``: the GGUF's own Jinja chat template. The rules go in the system
  message; tool results come back as a user turn of ``tool:`` lines (many templates know no
  tool role).

Both render a conversation so that the prompt of the next round starts with the prompt and
output of this one, which lets llama.cpp reuse its KV cache for everything but the new
tokens.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from tooldeck.errors import ModelError
from tooldeck.messages import Message, ToolCall, ToolSpec
from tooldeck.models.local._grammar import ANSWER_PREFIX, CALL_PREFIX, TurnSyntax, call_head

RULES = """\
To call tools, write one line per call:
call {"name": "<tool name>", "arguments": {<the arguments as JSON>}}
Each tool's result comes back on a line starting with "tool:".
To give the final answer, write one line:
answer <your answer>"""

EXAMPLES = """\
Example (count_letters and convert_currency are only illustrations, not tools you have):
user: How many letters are in the word "banana"?
assistant: call {"name": "count_letters", "arguments": {"word": "banana"}}
tool: 6
assistant: answer The word "banana" has 6 letters.

user: How much is 20 euros in dollars?
assistant: call {"name": "convert_currency", "arguments": {"amount": 20, "from": "EUR", \
"to": "USD"}}
tool: 21.60
assistant: answer 20 euros are 21.60 dollars."""

RawLookup = Callable[[Message], str | None]
"""The exact text the model wrote for an assistant message, if this model wrote it."""


class PromptFormat(ABC):
    """A way of writing the prompt: the same rules in every format (``rules_text``), laid out
    with the conversation as the format lays them out (``_laid_out``)."""

    syntax: TurnSyntax
    special_tokens: bool
    """Whether the prompt text spells special tokens (a chat template's) to tokenize as such."""

    def render(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        instructions: str,
        raw_text: RawLookup,
    ) -> str:
        """The prompt text, ending where the model writes its turn."""
        return self._laid_out(rules_text(tools, instructions), messages, raw_text)

    @abstractmethod
    def _laid_out(self, rules: str, messages: Sequence[Message], raw_text: RawLookup) -> str:
        """The rules and the conversation in this format's layout."""


def rules_text(tools: Sequence[ToolSpec], instructions: str) -> str:
    """Instructions, the tool catalogue, the format rules and the worked example."""
    parts = [instructions.strip()] if instructions.strip() else []
    if tools:
        catalogue = "\n".join(_describe(spec) for spec in tools)
        parts += [f"You can call these tools:\n\n{catalogue}", RULES, EXAMPLES]
    else:
        parts.append("Write the final answer on one line:\nanswer <your answer>")
    return "\n\n".join(parts)


def _describe(spec: ToolSpec) -> str:
    schema = json.dumps(spec.parameters, ensure_ascii=False, separators=(",", ":"))
    description = " ".join(spec.description.split())
    return f"{spec.name}: {description}\n  arguments: {schema}"


def assistant_text(message: Message, raw_text: RawLookup, lead: str = "") -> str:
    """What the model wrote for ``message``: its exact text if known, else the canonical form
    (after ``lead``, the text a turn starts with)."""
    raw = raw_text(message)
    if raw is not None:
        return raw
    if message.tool_calls:  # any text beside calls has no place in this format
        calls = (f"{call_head(c.name)}{c.arguments_json}}}" for c in message.tool_calls)
        return lead + "\n".join(calls)
    return lead + ANSWER_PREFIX + message.content


class TranscriptFormat(PromptFormat):
    """tooldeck's own plain transcript, for models without a chat template."""

    syntax = TurnSyntax(multiline_answer=False, end_of_calls="\ntool:", lead=" ")
    special_tokens = False

    def _laid_out(self, rules: str, messages: Sequence[Message], raw_text: RawLookup) -> str:
        lines = [rules, "", "Conversation:"]
        for message in messages:
            if message.role == "assistant":
                said = assistant_text(message, raw_text, self.syntax.lead)
                lines.append(f"assistant:{said.removesuffix(chr(10))}")
            else:
                lines.append(f"{message.role}: {message.content}")
        return "\n".join(lines) + "\nassistant:"


class TemplateFormat(PromptFormat):
    """The GGUF's Jinja chat template, with the rules in the system message."""

    syntax = TurnSyntax(multiline_answer=True)
    special_tokens = True

    def __init__(self, template: str, bos_token: str, eos_token: str) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self._formatter = Jinja2ChatFormatter(template, eos_token, bos_token)

    def _laid_out(self, rules: str, messages: Sequence[Message], raw_text: RawLookup) -> str:
        turns = _chat_turns(messages, raw_text)
        try:
            return self._apply([{"role": "system", "content": rules}, *turns])
        except Exception:  # a template that refuses a system role: fold it into the first turn
            if turns and turns[0]["role"] == "user":
                turns[0] = {"role": "user", "content": f"{rules}\n\n{turns[0]['content']}"}
            else:
                turns.insert(0, {"role": "user", "content": rules})
            return self._apply(turns)

    def _apply(self, turns: list[dict[str, Any]]) -> str:
        try:
            prompt: str = self._formatter(messages=turns).prompt  # type: ignore[arg-type]
        except Exception as error:
            raise ModelError(f"the GGUF's chat template failed: {error}") from error
        return prompt


def _chat_turns(messages: Sequence[Message], raw_text: RawLookup) -> list[dict[str, Any]]:
    """Messages as alternating chat turns; tool results become a user turn of ``tool:`` lines."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            role, content = "assistant", assistant_text(message, raw_text)
        elif message.role == "tool":
            role, content = "user", f"tool: {message.content}"
        else:
            role, content = "user", message.content
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": f"{turns[-1]['content']}\n{content}"}
        else:
            turns.append({"role": role, "content": content})
    return turns


_CUT_CALL = re.compile(r'^call \{"name": ("(?:[^"\\]|\\.)*"), "arguments": ?(.*)$', re.DOTALL)


def parse_turn(text: str, first_number: int) -> tuple[str, tuple[ToolCall, ...]]:
    """The answer, or the calls (ids ``call_<n>`` from ``first_number`` on), in ``text``.

    Text cut short by the token budget keeps what it can: an answer so far, or a call whose
    arguments did not close (the loop answers it with ``invalid_json``).
    """
    if text.startswith(ANSWER_PREFIX) or ANSWER_PREFIX.startswith(text):
        return text[len(ANSWER_PREFIX) :].strip(), ()
    lines = [line for line in text.split("\n") if line.strip()]
    calls = tuple(
        _parse_call(line, f"call_{number}") for number, line in enumerate(lines, first_number)
    )
    return "", calls


def _parse_call(line: str, call_id: str) -> ToolCall:
    try:
        parsed, _ = json.JSONDecoder().raw_decode(line, len(CALL_PREFIX))
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("name"), str):
        arguments = parsed.get("arguments")
        if isinstance(arguments, dict):
            return ToolCall(id=call_id, name=parsed["name"], arguments=arguments)
    cut = _CUT_CALL.match(line)
    if cut is None:
        raise ModelError(
            f"the local model's turn was cut off before it named a tool: {line!r}; raise max_tokens"
        )
    return ToolCall.from_json(call_id, json.loads(cut.group(1)), cut.group(2))
