"""Each family split over 2 gloo ranks computes the unsharded model's logits, from about half the weights.

One spawn of two ranks runs every case (spawning costs seconds); the tests then compare what each rank
returned with the same checkpoint loaded whole in this process.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from autoglm.models import ModelConfig, load_model
from tests.distributed.ranks import run_on_ranks
from tests.distributed.sharded_runs import ModelRun, run_each, run_model
from tests.tiny_models import make_tiny_checkpoint

WORLD_SIZE = 2

# name -> (family, config overrides); 4 query heads over 2 KV heads unless stated.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-with-biases": ("llama", {"attention_bias": True, "mlp_bias": True}),  # o_proj/down_proj biases once
    "qwen2": ("qwen2", {}),  # q/k/v biases
    "qwen3-one-kv-head-tied-odd-vocab": (  # the KV head replicated; q/k norms; a padded, tied vocabulary
        "qwen3", {"num_key_value_heads": 1, "tie_word_embeddings": True, "vocab_size": 321}
    ),
    "glm4": ("glm4", {}),  # gate_up fused in the checkpoint, partial interleaved rotary
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, ModelRun, list[ModelRun]]]:
    """Per case: the checkpoint, the unsharded run, and each rank's run."""
    root = tmp_path_factory.mktemp("sharded")
    dirs = {name: make_tiny_checkpoint(family, root / name, **overrides) for name, (family, overrides) in CASES.items()}
    per_rank = run_on_ranks(run_each, root, [(str(path), None) for path in dirs.values()], world_size=WORLD_SIZE)
    return {name: (path, run_model(path), [rank_runs[i] for rank_runs in per_rank])
            for i, (name, path) in enumerate(dirs.items())}


@pytest.mark.parametrize("case", CASES)
def test_every_rank_computes_the_unsharded_logits(runs, case: str) -> None:
    _, whole, ranks = runs[case]
    for rank in ranks:
        torch.testing.assert_close(rank.logits, whole.logits, atol=1e-5, rtol=0)


@pytest.mark.parametrize("case", CASES)
def test_each_rank_holds_about_half_the_weights(runs, case: str) -> None:
    path, whole, ranks = runs[case]
    config = ModelConfig.from_pretrained(path)
    model, _ = load_model(path, torch.float32, torch.device("cpu"))
    replicated = sum(parameter.numel() * parameter.element_size() for name, parameter in model.named_parameters()
                     if "norm" in name or name.endswith(("o_proj.bias", "down_proj.bias")))
    if config.num_key_value_heads < WORLD_SIZE:  # k and v rows of the fused projection, weights and biases
        kv_rows = 2 * config.num_key_value_heads * config.head_dim
        replicated += config.num_hidden_layers * kv_rows * (config.hidden_size + 1) * 4
    padding = config.hidden_size * 4  # at most one row of a vocabulary that does not divide
    for rank in ranks:
        assert whole.weight_bytes / 2 < rank.weight_bytes <= whole.weight_bytes / 2 + replicated + padding


@pytest.mark.parametrize("case", CASES)
def test_each_rank_caches_only_its_kv_heads(runs, case: str) -> None:
    path, whole, ranks = runs[case]
    num_kv_heads = ModelConfig.from_pretrained(path).num_key_value_heads
    local_kv_heads = max(1, num_kv_heads // WORLD_SIZE)
    for rank in ranks:
        assert rank.kv_bytes_per_block * num_kv_heads == whole.kv_bytes_per_block * local_kv_heads
