"""How the C allocator (glibc's malloc, under torch's CPU tensors) holds memory for a CPU engine.

By default glibc serves every allocation above 32 MiB with a fresh ``mmap`` and unmaps it on free,
and gives memory freed at the top of its heap back to the system past 128 KiB. Each step of a
CPU engine allocates and frees the same large activations (a prefill chunk's MLP, the logits of
a batch: 39 MB for 64 rows of a 152k-token vocabulary), so each step paid to fault every page of
them in again (docs/PERFORMANCE.md, "The C allocator", measures what that cost). Raised
thresholds keep freed memory in the process to be reused; a server gives it back when idle (:func:`release_free_memory`), so it
costs memory only while it is being used.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

logger = logging.getLogger(__name__)

# mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Allocations up to this size come from the heap and are reused; larger ones (a whole KV pool,
# prompt log-probs over a long prompt) are still mapped and unmapped on their own.
REUSED_ALLOCATION_BYTES = 1 << 30
# Variables through which a user sets glibc's thresholds; where any is set, theirs stand.
_ALLOCATOR_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")

_LIBC_NAME = ctypes.util.find_library("c")
_LIBC = None if _LIBC_NAME is None else ctypes.CDLL(_LIBC_NAME)
# glibc's functions, each None where the C library has none (macOS, musl).
_MALLOPT = getattr(_LIBC, "mallopt", None)
_MALLOC_TRIM = getattr(_LIBC, "malloc_trim", None)


def keep_freed_memory_for_reuse() -> bool:
    """Raise glibc's mmap and trim thresholds for this process, unless the environment sets them;
    True when they were raised. Safe to call more than once."""
    if _MALLOPT is None or any(variable in os.environ for variable in _ALLOCATOR_VARIABLES):
        return False
    raised = all(_MALLOPT(parameter, REUSED_ALLOCATION_BYTES) == 1
                 for parameter in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD))
    if raised:
        logger.debug("C allocator: freed blocks up to %d MiB kept for reuse", REUSED_ALLOCATION_BYTES >> 20)
    return raised


def release_free_memory() -> bool:
    """Give the memory the C allocator holds free back to the system; False where that is not possible."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True
