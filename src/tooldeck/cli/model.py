"""The model a command runs on: ``--model``, ``--base-url`` and ``--api-key-env NAME``.

A key is never an argument (it would stay in the shell's history and the process list):
``--api-key-env`` names the environment variable that holds it. A hosted model with no key
says which variables and options there are, in the command line's words.
"""

from __future__ import annotations

import os

from tooldeck.cli.args import CliError, UsageError, is_env_name
from tooldeck.models.base import Model
from tooldeck.models.resolve import resolve_model

_KEYS: dict[str, tuple[tuple[str, ...], str]] = {
    "openai": (("OPENAI_API_KEY",), "OPENAI_BASE_URL"),
    "openai-chat": (("OPENAI_API_KEY",), "OPENAI_BASE_URL"),
    "azure": (("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"), ""),
    "anthropic": (("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"), "ANTHROPIC_BASE_URL"),
    "gemini": (("GEMINI_API_KEY", "GOOGLE_API_KEY"), ""),
}
"""Per provider: the variables its key may be in, and the one for another endpoint (a
server there may need no key)."""


def build_model(name: str, base_url: str | None, api_key_env: str | None) -> Model:
    """The model ``--model name`` names, at ``base_url``, with the key from ``api_key_env``."""
    provider = name.partition(":")[0]
    options: dict[str, str] = {}
    if base_url is not None:
        if provider == "local" or provider not in _KEYS:
            raise UsageError(f"--base-url is for hosted models ({', '.join(_KEYS)}), not {name!r}")
        options["endpoint" if provider == "azure" else "base_url"] = base_url
    if api_key_env is not None:
        options["api_key"] = _key_from(api_key_env)
    elif provider in _KEYS:
        _check_key(name, provider, base_url)
    return resolve_model(name, **options)


def _key_from(variable: str) -> str:
    if not is_env_name(variable):
        raise UsageError(
            "--api-key-env takes the NAME of an environment variable that holds the key "
            "(e.g. --api-key-env MY_OPENAI_KEY), never the key itself"
        )
    key = os.environ.get(variable, "")
    if not key:
        raise UsageError(f"--api-key-env {variable}: the environment variable is not set")
    return key


def _check_key(name: str, provider: str, base_url: str | None) -> None:
    variables, endpoint_variable = _KEYS[provider]
    if any(os.environ.get(variable) for variable in variables):
        return
    if endpoint_variable and (base_url is not None or os.environ.get(endpoint_variable)):
        return  # a compatible server: it may need no key
    where = " or ".join(variables)
    server = "; for a compatible server give --base-url URL" if endpoint_variable else ""
    raise CliError(
        f"no API key for {name!r}: set {where}, or name the variable that holds it with "
        f"--api-key-env NAME{server}"
    )
