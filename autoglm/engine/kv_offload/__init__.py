"""The KV cache's lower tiers, as the engine sees them: which blocks host memory and disk hold, and the moves
each step asks the runner for (the copies themselves are in :mod:`autoglm.runner.kv_tiers`)."""
