"""Memory that torch and the C allocator hold outside Python, bounded for a server that runs for weeks.

Two things made a long-running server's resident memory climb while Python's own heap stayed flat
(tracemalloc showed under 1 MB of change over thousands of requests):

* oneDNN, which computes torch's bfloat16 matmuls on CPUs, caches one compiled primitive per
  matrix shape, up to 1,024 of them. Every distinct count of batched tokens is a new shape for every
  linear layer, so under varied traffic the cache fills with hundreds of megabytes. A smaller cap
  keeps the shapes in steady use (the decode batch sizes) and lets the rest go.
* glibc's allocator keeps freed memory in its per-thread arenas rather than returning it to the
  system (and a CPU engine asks it to keep more, ``autoglm/host_allocator.py``). The engine thread
  returns it with ``release_free_memory`` when it runs out of work.
"""
from __future__ import annotations

import os

ONEDNN_CACHE_VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
# Enough for the few shapes of each linear layer in steady use; oneDNN's own default is 1024.
ONEDNN_CACHE_CAPACITY = 64


def bound_onednn_primitive_cache() -> None:
    """Cap oneDNN's cache of compiled matmuls, unless the environment already sets the cap.

    oneDNN reads the variable when it builds its first primitive, so call this before the model runs.
    """
    os.environ.setdefault(ONEDNN_CACHE_VARIABLE, str(ONEDNN_CACHE_CAPACITY))
