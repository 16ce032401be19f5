"""uvicorn's settings for a server of these settings: where it listens and how it guards its connections.

One place for them, so ``autoglm serve`` and the tests' servers run the same HTTP layer.
"""
from __future__ import annotations

import uvicorn
from fastapi import FastAPI

from autoglm.config import ServerConfig
from autoglm.server.http.connection_guard import guarded_protocol

# Seconds uvicorn waits for connections after the drain; the engine has stopped by then.
CONNECTION_CLOSE_TIMEOUT_S = 5


def uvicorn_config(app: FastAPI, config: ServerConfig) -> uvicorn.Config:
    """The uvicorn.Config serving `app`; logging stays ours (request lines are JSON, see tracking.py)."""
    return uvicorn.Config(
        app, host=config.http.host, port=config.http.port, log_config=None, access_log=False,
        http=guarded_protocol(config.http.max_connections, config.http.header_read_timeout_s),
        timeout_graceful_shutdown=CONNECTION_CLOSE_TIMEOUT_S,
    )
