"""Mixture-of-experts families: logits equal transformers' at every prompt position (float32) across their
settings, and what the engine cannot run yet for them (the native decode step, tensor parallelism, int8
activations) is refused or skipped by name."""
from __future__ import annotations

from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from autoglm.models import ModelConfig, load_model
from autoglm.models.linear_method import WeightQuantization, with_int_weights
from autoglm.models.linear_method.selection import LinearMethods
from autoglm.models.parameter_count import count_active_parameters, count_parameters
from tests.models.logit_parity import max_logprob_difference
from tests.tiny_models import MOE_ARCHITECTURES, make_tiny_checkpoint

TOLERANCE = 1e-4

CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "glm4_moe": ("glm4_moe", {}),
    "glm4_moe-qk-norm-tied-one-group": (
        "glm4_moe", {"use_qk_norm": True, "tie_word_embeddings": True, "n_group": 1, "norm_topk_prob": False},
    ),
    "qwen3_moe-unnormalised-with-biases": ("qwen3_moe", {"norm_topk_prob": False, "attention_bias": True}),
    "qwen3_moe-every-second-layer": ("qwen3_moe", {"decoder_sparse_step": 2, "mlp_only_layers": []}),
}


@pytest.mark.parametrize("case", CASES)
def test_family_matches_transformers(case, tmp_path):
    family, overrides = CASES[case]
    model_dir = make_tiny_checkpoint(family, tmp_path, **overrides)
    assert max_logprob_difference(model_dir) < TOLERANCE


@pytest.fixture(scope="module")
def glm4_moe_dir(tmp_path_factory):
    return make_tiny_checkpoint("glm4_moe", tmp_path_factory.mktemp("glm4_moe"))


def test_glm_multi_token_prediction_layers_in_the_checkpoint_are_skipped(glm4_moe_dir, tmp_path):
    """Hub checkpoints append them as layer N (N the decoder's layer count); nothing here runs them yet."""
    model_dir = tmp_path / "with-mtp"
    model_dir.mkdir()
    for file in glm4_moe_dir.iterdir():
        (model_dir / file.name).symlink_to(file)
    save_file({"model.layers.3.eh_proj.weight": torch.zeros(64, 128),
               "model.layers.3.mlp.experts.0.up_proj.weight": torch.zeros(32, 64)},
              str(model_dir / "mtp.safetensors"))
    load_model(model_dir, torch.float32, torch.device("cpu"))
    save_file({"model.layers.4.eh_proj.weight": torch.zeros(64, 128)}, str(model_dir / "mtp.safetensors"))
    with pytest.raises(ValueError, match="'model.layers.4.eh_proj.weight' matches no parameter"):
        load_model(model_dir, torch.float32, torch.device("cpu"))


def test_active_parameters_count_each_sparse_layer_at_top_k_of_its_experts(glm4_moe_dir):
    model, config = load_model(glm4_moe_dir, torch.float32, torch.device("cpu"))
    moe = config.moe
    per_expert = 3 * config.hidden_size * moe.moe_intermediate_size
    sparse_layers = sum(moe.is_sparse(index) for index in range(config.num_hidden_layers))
    unused = sparse_layers * (moe.num_experts - moe.num_experts_per_tok) * per_expert
    assert count_active_parameters(model) == count_parameters(model) - unused


def test_a_moe_model_never_takes_the_dense_native_decode_step(glm4_moe_dir):
    model, _ = load_model(glm4_moe_dir, torch.float32, torch.device("cpu"))
    model.enable_native_decode(64)
    assert model.native_decode is None


@pytest.mark.parametrize("family", MOE_ARCHITECTURES)
def test_int8_activations_are_refused_by_name(family, glm4_moe_dir, tmp_path):
    model_dir = glm4_moe_dir if family == "glm4_moe" else make_tiny_checkpoint(family, tmp_path)
    config = ModelConfig.from_pretrained(model_dir)
    w8a8 = WeightQuantization.from_settings("w8a8")
    with pytest.raises(ValueError, match="mixture-of-experts .* choose quantization int8 or int4"):
        with_int_weights(LinearMethods(), config, w8a8, torch.float32, torch.float32)
