"""Tensor parallelism: which rank this process is, and the collectives the sharded model calls."""
