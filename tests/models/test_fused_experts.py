"""Stacked experts compute what transformers' experts compute, and load from per-expert or fused checkpoint names."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import Glm4MoeConfig
from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeExperts

from autoglm.models.expert_method import UnquantizedExpertMethod
from autoglm.models.fused_experts import FusedExperts
from autoglm.models.weight_loading import load_checkpoint_weights

NUM_EXPERTS, TOP_K, HIDDEN, INTERMEDIATE, NUM_TOKENS = 8, 3, 32, 16, 40


class Layer(nn.Module):
    """A parent, so that the experts' names read as in a checkpoint (``experts.3.up_proj.weight``)."""

    def __init__(self) -> None:
        super().__init__()
        self.experts = FusedExperts(NUM_EXPERTS, TOP_K, HIDDEN, INTERMEDIATE, UnquantizedExpertMethod())


def fused_weights(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return {"experts.gate_up_proj": torch.randn(NUM_EXPERTS, 2 * INTERMEDIATE, HIDDEN, generator=generator) * 0.2,
            "experts.down_proj": torch.randn(NUM_EXPERTS, HIDDEN, INTERMEDIATE, generator=generator) * 0.2}


def per_expert_weights(fused: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same weights as a hub checkpoint names them, one tensor per expert and projection."""
    weights = {}
    for expert in range(NUM_EXPERTS):
        gate, up = fused["experts.gate_up_proj"][expert].chunk(2)
        weights[f"experts.{expert}.gate_proj.weight"] = gate
        weights[f"experts.{expert}.up_proj.weight"] = up
        weights[f"experts.{expert}.down_proj.weight"] = fused["experts.down_proj"][expert]
    return weights


def loaded(weights: dict[str, torch.Tensor]) -> Layer:
    layer = Layer()
    load_checkpoint_weights(layer, weights.items())
    return layer


def routing(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's distinct experts (some experts get no token) and positive weights."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(NUM_EXPERTS - 2, generator=generator)[:TOP_K] for _ in range(NUM_TOKENS)])
    return ids, torch.rand(NUM_TOKENS, TOP_K, generator=generator)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_routed_experts_match_transformers(dtype):
    fused = fused_weights()
    config = Glm4MoeConfig(hidden_size=HIDDEN, n_routed_experts=NUM_EXPERTS, moe_intermediate_size=INTERMEDIATE)
    config._experts_implementation = "eager"  # its plain loop over the experts: a reference apart from grouped_mm
    reference = Glm4MoeExperts(config)
    with torch.no_grad():
        reference.gate_up_proj.copy_(fused["experts.gate_up_proj"])
        reference.down_proj.copy_(fused["experts.down_proj"])
    layer = loaded(fused).to(dtype)
    hidden = torch.randn(NUM_TOKENS, HIDDEN, generator=torch.Generator().manual_seed(2))
    ids, weights = routing()
    with torch.no_grad():
        expected = reference(hidden, ids, weights)
        got = layer.experts(hidden.to(dtype), ids, weights)
    assert got.dtype == dtype
    tolerance = 1e-6 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.float(), expected, rtol=tolerance, atol=tolerance)


def test_per_expert_and_fused_checkpoint_names_load_the_same_weights():
    fused = fused_weights()
    from_fused, from_experts = loaded(fused), loaded(per_expert_weights(fused))
    for name, parameter in from_fused.named_parameters():
        assert torch.equal(parameter, dict(from_experts.named_parameters())[name]), name


def test_an_expert_missing_or_given_twice_is_refused():
    weights = per_expert_weights(fused_weights())
    missing = {name: tensor for name, tensor in weights.items() if name != "experts.5.up_proj.weight"}
    with pytest.raises(ValueError, match="checkpoint has no weights for: experts.gate_up_proj"):
        loaded(missing)
    twice = {**fused_weights(), "experts.5.down_proj.weight": weights["experts.5.down_proj.weight"]}
    with pytest.raises(ValueError, match="already loaded"):
        loaded(twice)
    with pytest.raises(ValueError, match=r"has shape \(4, 32\), but the model expects \(16, 32\)"):
        loaded({**weights, "experts.5.up_proj.weight": torch.zeros(4, HIDDEN)})
    with pytest.raises(ValueError, match="'experts.8.up_proj.weight' matches no parameter"):
        loaded({**weights, "experts.8.up_proj.weight": torch.zeros(INTERMEDIATE, HIDDEN)})
