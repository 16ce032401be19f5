"""Whether long work shows a progress bar.

Bars count as INFO output: shown when the ``autoglm`` loggers would print INFO lines, so the
command line's ``--quiet`` and ``--log-level warning`` hide them along with the start-up lines.
"""
from __future__ import annotations

import logging


def show_progress() -> bool:
    return logging.getLogger("autoglm").isEnabledFor(logging.INFO)
