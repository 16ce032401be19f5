"""Expert settings from config.json: both families' spellings, transformers' defaults, which layers are sparse,
and a clear error for each setting that cannot route."""
from __future__ import annotations

from typing import Any

import pytest

from autoglm.models import ModelConfig
from autoglm.models.moe_config import GROUPED_SIGMOID_ROUTER, SOFTMAX_ROUTER, MoeConfig
from tests.tiny_models import TINY_SHAPE

# As the hub's GLM-4.5-Air and Qwen3-30B-A3B configs spell them, shrunk.
GLM4_MOE: dict[str, Any] = {
    **TINY_SHAPE, "architectures": ["Glm4MoeForCausalLM"], "num_hidden_layers": 4, "n_routed_experts": 16,
    "num_experts_per_tok": 4, "moe_intermediate_size": 32, "n_shared_experts": 1, "n_group": 1, "topk_group": 1,
    "first_k_dense_replace": 1, "norm_topk_prob": True, "routed_scaling_factor": 1.0,
    "num_nextn_predict_layers": 1, "partial_rotary_factor": 0.5, "attention_bias": True, "use_qk_norm": False,
}
QWEN3_MOE: dict[str, Any] = {
    **TINY_SHAPE, "architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 4, "num_experts": 16,
    "num_experts_per_tok": 4, "moe_intermediate_size": 32, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "norm_topk_prob": True,
}


def moe_of(config: dict[str, Any]) -> MoeConfig:
    moe = ModelConfig.from_dict(config).moe
    assert moe is not None
    return moe


def test_glm4_moe_settings():
    config = ModelConfig.from_dict(GLM4_MOE)
    assert config.moe == MoeConfig(num_experts=16, num_experts_per_tok=4, moe_intermediate_size=32,
                                   router=GROUPED_SIGMOID_ROUTER, norm_topk_prob=True, num_shared_experts=1,
                                   first_k_dense_replace=1, num_nextn_predict_layers=1)
    assert config.rope.partial_rotary_factor == 0.5 and config.attention_bias and not config.use_qk_norm
    assert [config.moe.is_sparse(index) for index in range(4)] == [False, True, True, True]


def test_glm4_moe_defaults_are_transformers():
    """Glm4MoeConfig's: grouped routing off, rescaled weights, one shared expert, one dense layer first."""
    bare = {key: value for key, value in GLM4_MOE.items()
            if key in (*TINY_SHAPE, "architectures", "n_routed_experts", "num_experts_per_tok",
                       "moe_intermediate_size")}
    config = ModelConfig.from_dict(bare)
    assert config.moe == moe_of(GLM4_MOE)
    assert config.rope.partial_rotary_factor == 0.5 and not config.attention_bias


def test_qwen3_moe_settings_in_either_spelling_of_the_expert_count():
    hub = moe_of(QWEN3_MOE)
    assert hub == MoeConfig(num_experts=16, num_experts_per_tok=4, moe_intermediate_size=32, router=SOFTMAX_ROUTER,
                            norm_topk_prob=True)
    transformers_5 = {key: value for key, value in QWEN3_MOE.items() if key != "num_experts"}
    assert moe_of({**transformers_5, "num_local_experts": 16}) == hub
    assert not moe_of({key: value for key, value in QWEN3_MOE.items() if key != "norm_topk_prob"}).norm_topk_prob


def test_qwen3_moe_sparse_layers_follow_the_step_less_the_dense_list():
    moe = moe_of({**QWEN3_MOE, "decoder_sparse_step": 2, "mlp_only_layers": [3]})
    assert [moe.is_sparse(index) for index in range(4)] == [False, True, False, False]


def test_a_dense_family_has_no_expert_settings():
    assert ModelConfig.from_dict({**TINY_SHAPE, "architectures": ["Qwen3ForCausalLM"], "num_experts": 8}).moe is None


@pytest.mark.parametrize("base,change,message", [
    (GLM4_MOE, {"n_routed_experts": None}, "missing the required key 'n_routed_experts'"),
    (QWEN3_MOE, {"num_experts": None}, "missing the required key 'num_local_experts'"),
    (QWEN3_MOE, {"num_experts": 0}, "'num_experts' must be a positive integer, got 0"),
    (GLM4_MOE, {"num_experts_per_tok": 17}, r"num_experts_per_tok \(17\) must be at most the number of routed"),
    (GLM4_MOE, {"n_group": 3}, r"n_group \(3\) must divide n_routed_experts \(16\) into groups of at least 2"),
    (GLM4_MOE, {"n_group": 16}, r"n_group \(16\) must divide n_routed_experts \(16\) into groups of at least 2"),
    (GLM4_MOE, {"n_group": 4, "topk_group": 5}, r"topk_group \(5\) must be at most n_group \(4\)"),
    (GLM4_MOE, {"n_group": 8, "topk_group": 1}, r"num_experts_per_tok \(4\) must be at most the experts in "
                                                r"topk_group groups \(2\)"),
    (GLM4_MOE, {"norm_topk_prob": "yes"}, "'norm_topk_prob' must be true or false, got 'yes'"),
    (GLM4_MOE, {"routed_scaling_factor": 0}, "'routed_scaling_factor' must be a positive number, got 0"),
    (GLM4_MOE, {"first_k_dense_replace": -1}, "'first_k_dense_replace' must be an integer of at least 0, got -1"),
    (QWEN3_MOE, {"mlp_only_layers": [4]}, r"'mlp_only_layers' must be a list of integers from 0 to 3, got \[4\]"),
    (QWEN3_MOE, {"decoder_sparse_step": 0}, "'decoder_sparse_step' must be a positive integer, got 0"),
])
def test_settings_that_cannot_route_are_refused_by_name(base, change, message):
    config = {key: value for key, value in {**base, **change}.items() if value is not None}
    with pytest.raises(ValueError, match=message):
        ModelConfig.from_dict(config, source="config.json")
