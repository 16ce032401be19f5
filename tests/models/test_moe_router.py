"""Each router picks the experts, and gives them the weights, that transformers' router does for the same rows."""
from __future__ import annotations

import pytest
import torch
from transformers import Glm4MoeConfig, Qwen3MoeConfig
from transformers.models.glm4_moe.modeling_glm4_moe import Glm4MoeTopkRouter
from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeTopKRouter

from autoglm.models.moe_config import GROUPED_SIGMOID_ROUTER, SOFTMAX_ROUTER, MoeConfig
from autoglm.models.moe_router import make_router

HIDDEN = 32
NUM_TOKENS = 64
NUM_EXPERTS = 16


def random_rows(seed: int) -> torch.Tensor:
    """Random router inputs; float scores of random rows tie with negligible odds."""
    return torch.randn(NUM_TOKENS, HIDDEN, generator=torch.Generator().manual_seed(seed))


def assert_same_choice(ours: tuple[torch.Tensor, torch.Tensor], ids: torch.Tensor, weights: torch.Tensor) -> None:
    """The same experts with the same weights, in whatever order each lists them."""
    our_ids, our_weights = ours
    order, reference_order = our_ids.argsort(), ids.argsort()
    assert torch.equal(our_ids.gather(1, order), ids.gather(1, reference_order))
    torch.testing.assert_close(our_weights.gather(1, order), weights.float().gather(1, reference_order),
                               rtol=1e-6, atol=1e-7)


def glm_routers(norm_topk_prob: bool, num_groups: int, topk_groups: int, bias_std: float = 0.3):
    """Ours and transformers' GLM-4.5 router with the same random weight and correction bias."""
    moe = MoeConfig(num_experts=NUM_EXPERTS, num_experts_per_tok=4, moe_intermediate_size=8,
                    router=GROUPED_SIGMOID_ROUTER, norm_topk_prob=norm_topk_prob, num_groups=num_groups,
                    topk_groups=topk_groups, routed_scaling_factor=2.5)
    reference = Glm4MoeTopkRouter(Glm4MoeConfig(hidden_size=HIDDEN, n_routed_experts=NUM_EXPERTS, num_experts_per_tok=4,
                                                n_group=num_groups, topk_group=topk_groups,
                                                norm_topk_prob=norm_topk_prob, routed_scaling_factor=2.5))
    generator = torch.Generator().manual_seed(1)
    ours = make_router(moe, HIDDEN)
    with torch.no_grad():
        reference.weight.copy_(torch.randn(NUM_EXPERTS, HIDDEN, generator=generator) * 0.2)
        reference.e_score_correction_bias.copy_(torch.randn(NUM_EXPERTS, generator=generator) * bias_std)
        ours.weight.copy_(reference.weight)
        ours.e_score_correction_bias.copy_(reference.e_score_correction_bias)
    return ours, reference


@pytest.mark.parametrize("norm_topk_prob", [True, False])
@pytest.mark.parametrize("num_groups,topk_groups", [(4, 2), (1, 1), (8, 8)])
def test_grouped_sigmoid_router_matches_transformers(norm_topk_prob, num_groups, topk_groups):
    ours, reference = glm_routers(norm_topk_prob, num_groups, topk_groups)
    rows = random_rows(2)
    with torch.no_grad():
        for inputs in (rows, rows.bfloat16()):  # transformers' GLM router too reads bfloat16 rows in float32
            _, weights, ids = reference(inputs)
            assert_same_choice(ours(inputs), ids, weights)


def test_the_correction_bias_changes_the_choice_but_not_the_weights_it_gives():
    """So that a router ignoring the bias, or weighting by the shifted scores, fails the parity tests."""
    biased, _ = glm_routers(True, 4, 2)
    unbiased, _ = glm_routers(True, 4, 2, bias_std=0.0)
    rows = random_rows(3)
    with torch.no_grad():
        (biased_ids, _), (unbiased_ids, _) = biased(rows), unbiased(rows)
        assert not torch.equal(biased_ids.sort().values, unbiased_ids.sort().values)
        same = (biased_ids.sort().values == unbiased_ids.sort().values).all(dim=1)
        torch.testing.assert_close(biased(rows[same])[1].sort().values, unbiased(rows[same])[1].sort().values)


@pytest.mark.parametrize("norm_topk_prob", [True, False])
def test_softmax_router_matches_transformers(norm_topk_prob):
    moe = MoeConfig(num_experts=NUM_EXPERTS, num_experts_per_tok=4, moe_intermediate_size=8, router=SOFTMAX_ROUTER,
                    norm_topk_prob=norm_topk_prob)
    reference = Qwen3MoeTopKRouter(Qwen3MoeConfig(hidden_size=HIDDEN, num_experts=NUM_EXPERTS, num_experts_per_tok=4,
                                                  norm_topk_prob=norm_topk_prob))
    ours = make_router(moe, HIDDEN)
    with torch.no_grad():
        reference.weight.copy_(torch.randn(NUM_EXPERTS, HIDDEN, generator=torch.Generator().manual_seed(4)))
        ours.weight.copy_(reference.weight)
        rows = random_rows(5)
        _, weights, ids = reference(rows)
        assert_same_choice(ours(rows), ids, weights)
