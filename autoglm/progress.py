"""Whether long work shows a progress bar, and how it says what it waits for.

Bars count as INFO output: shown when the ``autoglm`` loggers would print INFO lines, so the
command line's ``--quiet`` and ``--log-level warning`` hide them along with the start-up lines.
"""
from __future__ import annotations

import logging
import sys


def show_progress() -> bool:
    return logging.getLogger("autoglm").isEnabledFor(logging.INFO)


def announce(logger: logging.Logger, message: str) -> None:
    """Say what a long wait is for: in the log where the program set up logging (at INFO), else on stderr,
    where a script that set up nothing would otherwise see no line below WARNING."""
    if logger.hasHandlers():
        logger.info(message, stacklevel=2)
    else:
        print(message, file=sys.stderr, flush=True)
