"""Whether a model splits across a number of ranks, checked before any worker starts."""
from __future__ import annotations

from autoglm.models import ModelConfig


def check_splits(model_config: ModelConfig, world_size: int) -> None:
    """Attention heads split evenly; KV heads split evenly too, or (fewer than the ranks) are replicated."""
    heads, kv_heads = model_config.num_attention_heads, model_config.num_key_value_heads
    if heads % world_size:
        raise ValueError(f"tensor_parallel_size={world_size} must divide the model's {heads} attention heads; "
                         f"allowed: {', '.join(str(n) for n in range(1, heads + 1) if heads % n == 0)}")
    if kv_heads % world_size and world_size % kv_heads:
        raise ValueError(f"tensor_parallel_size={world_size} must divide the model's {kv_heads} KV heads or be a "
                         f"multiple of them (each KV head then replicated on several ranks)")
