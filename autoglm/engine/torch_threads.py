"""torch's CPU thread count, which is one per process however many engines run in it."""
from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)

_set_by_an_engine = False


def claim_num_threads(num_threads: int | None) -> None:
    """Set torch's thread count for this process the first time an engine asks for one.

    Changing it later would change it under the engines already running, so a later engine
    asking for another count keeps the current one and warns. None asks for nothing.
    """
    global _set_by_an_engine
    if num_threads is None:
        return
    if not _set_by_an_engine:
        torch.set_num_threads(num_threads)
        _set_by_an_engine = True
    elif num_threads != torch.get_num_threads():
        logger.warning("num_threads=%d ignored: an earlier engine in this process set torch's thread count, "
                       "which is one per process, and it stays %d; give every engine the same num_threads",
                       num_threads, torch.get_num_threads())
