"""Which decoder layers each pipeline stage holds: contiguous runs, as even as the count allows.

Where the stages do not divide the layers, the first stages take one layer more each: the last
stage also runs the final norm, the LM head and the sampler, so it is the one to lighten.
"""
from __future__ import annotations


def split_layers(num_layers: int, num_stages: int) -> list[range]:
    """The layers of each stage, in stage order; every stage gets at least one."""
    if num_stages < 1:
        raise ValueError(f"pipeline_parallel_size must be at least 1, got {num_stages}")
    if num_stages > num_layers:
        raise ValueError(f"pipeline_parallel_size {num_stages} is more than the model's {num_layers} decoder layers; "
                         f"allowed: 1 to {num_layers}, so that every stage holds a layer")
    base, remainder = divmod(num_layers, num_stages)
    stages, start = [], 0
    for stage in range(num_stages):
        end = start + base + (1 if stage < remainder else 0)
        stages.append(range(start, end))
        start = end
    return stages
