"""``bench ab -- serve``: each revision's own server, started for its run and stopped after it, so
the load and its client are the same on both sides and only the server differs."""
from __future__ import annotations

import argparse
import shlex
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autoglm.bench.ab.checkouts import Checkout
from autoglm.bench.ab.errors import ABError
from autoglm.bench.ab.sides import entry_point, environment, last_lines
from autoglm.bench.lib.errors import ServeBenchError
from autoglm.bench.lib.server import start_server

SERVE = "serve"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def with_served_tokenizer(arguments: list[str], server_args: str) -> list[str]:
    """``bench serve``'s arguments, given the tokenizer of the model the servers load (``--tokenizer``, else
    ``--model`` of ``server_args``) unless they name one: /v1/models names a model, never its folder."""
    if any(argument.split("=")[0] == "--tokenizer" for argument in arguments):
        return arguments
    served = argparse.ArgumentParser(add_help=False)
    served.add_argument("--model")
    served.add_argument("--tokenizer")
    known, _ = served.parse_known_args(shlex.split(server_args))
    folder = known.tokenizer or known.model
    return [*arguments, "--tokenizer", folder] if folder else arguments


@contextmanager
def revision_server(checkout: Checkout, server_args: str, log_path: Path, where: str) -> Iterator[str]:
    """The base URL of ``autoglm serve SERVER_ARGS`` run from the checkout's package, stopped on exit."""
    try:
        server = start_server(_free_port(), None, server_args, log_path, entry_point=entry_point(),
                              environment=environment(checkout))
    except ServeBenchError as error:
        log = log_path.read_text() if log_path.is_file() else ""
        raise ABError(f"the server did not start in {where}, on {checkout.revision.describe()}: {error}; "
                      f"its last lines:\n{last_lines(log)}") from None
    try:
        yield server.base_url
    finally:
        server.stop()
