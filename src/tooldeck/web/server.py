"""Serving the web app with uvicorn on a socket the caller has bound (so the address, and a
port picked by the system, are known before the server starts)."""

from __future__ import annotations

import socket

import uvicorn
from starlette.applications import Starlette


def serve(app: Starlette, listener: socket.socket) -> None:
    """Serve ``app`` on ``listener`` until Ctrl-C (or SIGTERM); quiet but for errors."""
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[listener])
