#!/usr/bin/env bash
# Creates the virtual environments of the libraries tooldeck is compared with
# (OpenAI Agents SDK, Pydantic AI, Microsoft Agent Framework), pinned, in $BENCH_VENVS
# (default ~/.cache/tooldeck-bench/venvs). About 240 MB, about a minute.
set -eu
bash "$(dirname "$0")/anchors/setup_venvs.sh"
# bench/sessions.py also measures the OpenAI Agents SDK's SQLAlchemySession (SQLite, PostgreSQL).
root=${BENCH_VENVS:-$HOME/.cache/tooldeck-bench/venvs}
"$root/openai_agents/bin/pip" install -q "openai-agents[sqlalchemy]==0.24.0" aiosqlite
