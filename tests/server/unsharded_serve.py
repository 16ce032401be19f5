"""``autoglm serve`` allowed tensor parallelism over models that do not shard yet (each rank holds the whole
model), so that the runtime's process tests can run a real server."""
from __future__ import annotations

import sys

from autoglm.cli import main
from autoglm.engine import setup

if __name__ == "__main__":
    setup.MODELS_SHARD = True
    sys.exit(main(sys.argv[1:]))
