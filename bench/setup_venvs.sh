#!/usr/bin/env bash
# Creates the virtual environments of the libraries tooldeck is compared with
# (OpenAI Agents SDK, Pydantic AI, Microsoft Agent Framework), pinned, in $BENCH_VENVS
# (default ~/.cache/tooldeck-bench/venvs). About 240 MB, about a minute.
exec bash "$(dirname "$0")/anchors/setup_venvs.sh"
