"""``autoglm serve``: the command line entry of the HTTP server.

Registering the subcommand imports nothing heavy; the server's modules load when it runs.
"""
from __future__ import annotations

import argparse
import logging
from functools import partial
from typing import TYPE_CHECKING

from autoglm.cli.settings import add_config_arguments, announce_model, config_from_args

if TYPE_CHECKING:
    from autoglm.config import ServerConfig

# Status when the model fails to load.
EXIT_LOAD_FAILED = 1
# Status when an engine breaks for good (a tensor-parallel worker died): an orchestrator restarts the server.
EXIT_ENGINE_BROKEN = 4


def add_serve_subcommand(subparsers: argparse._SubParsersAction) -> None:
    """Register ``serve`` with the ``autoglm`` command line."""
    parser = subparsers.add_parser(
        "serve", help="serve the OpenAI-compatible HTTP API",
        description="Serve /v1/completions, /v1/chat/completions, /health, /metrics and more over HTTP.",
    )
    parser.add_argument("--ray", action="store_true",
                        help="deploy engine replicas on Ray Serve behind its HTTP proxy (see the Ray Serve settings; "
                        "needs the ray extra)")
    add_config_arguments(parser, with_server_settings=True)
    parser.set_defaults(handler=run_server)


def run_server(args: argparse.Namespace) -> int:
    settings = config_from_args(args)  # a bad value is refused before the server's modules load
    from autoglm.engine.setup import check_tensor_parallel_split
    from autoglm.model_paths import resolve_model_path
    from autoglm.server.app import build_app
    from autoglm.server.http.draining_server import DrainingServer
    from autoglm.server.http.uvicorn_config import uvicorn_config

    config = settings.server_config()  # what the server reads, split once here
    if not settings.serve_models:  # else the registry's versions are served, each checked as it loads
        announce_model(settings)
        # Usage errors, reported before the server starts: a missing folder, a model that does not split.
        resolve_model_path(settings.model)
        check_tensor_parallel_split(config.engine)
    if args.ray:
        return _run_on_ray(config)
    _configure_logging()
    server: DrainingServer | None = None

    def stop(exit_code: int) -> None:
        assert server is not None
        server.stop(exit_code)

    app = build_app(config, on_load_failure=partial(stop, EXIT_LOAD_FAILED),
                    on_engine_broken=partial(stop, EXIT_ENGINE_BROKEN))
    server = DrainingServer(uvicorn_config(app, config), app.state.server)
    server.run()
    return server.exit_code


def _run_on_ray(config: ServerConfig) -> int:
    from autoglm.server.ray_serve import require_ray

    require_ray()
    from autoglm.server.ray_serve.launch import run_on_ray

    return run_on_ray(config)


def _configure_logging() -> None:
    """uvicorn logs at the command line's level; request lines are bare JSON, one per line, for log shippers."""
    from autoglm.server.observability.tracking import request_logger

    logging.getLogger("uvicorn").setLevel(logging.getLogger("autoglm").getEffectiveLevel())
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    request_logger.addHandler(handler)
    request_logger.propagate = False
