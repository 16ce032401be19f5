"""Tensor parallelism's processes: rank 0 (the engine's own) starts the workers, hands them each step's
plan, and stops them; each worker runs every plan on its shard of the model."""
