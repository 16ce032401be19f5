"""Mapping checkpoint tensors onto fused parameters, and the errors for tensors that do not fit."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autoglm.models import ModelConfig
from autoglm.models.decoder import DecoderForCausalLM
from autoglm.models.linear_method import LinearMethods
from autoglm.models.loader import iter_checkpoint_tensors, safetensors_files
from autoglm.models.registry import model_class_for
from tests.tiny_models import make_tiny_checkpoint

Weights = list[tuple[str, torch.Tensor]]


def checkpoint(family: str, folder: Path, **overrides) -> tuple[DecoderForCausalLM, Weights]:
    """An empty engine model of ``family`` and the tensors of a matching checkpoint."""
    model_dir = make_tiny_checkpoint(family, folder, **overrides)
    config = ModelConfig.from_pretrained(model_dir)
    return model_class_for(config.architecture)(config, LinearMethods()), list(
        iter_checkpoint_tensors(safetensors_files(model_dir))
    )


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> tuple[DecoderForCausalLM, Weights]:
    return checkpoint("llama", tmp_path_factory.mktemp("llama"))


def tensor_named(weights: Weights, name: str) -> torch.Tensor:
    return next(tensor for tensor_name, tensor in weights if tensor_name == name)


def test_split_projections_fill_their_slices_of_the_fused_ones(llama) -> None:
    model, weights = llama
    model.load_weights(weights)
    attention = model.model.layers[1].self_attn
    q, k, v = (
        tensor_named(weights, f"model.layers.1.self_attn.{name}.weight")
        for name in ("q_proj", "k_proj", "v_proj")
    )
    assert torch.equal(attention.qkv_proj.weight, torch.cat((q, k, v)))
    gate, up = (
        tensor_named(weights, f"model.layers.1.mlp.{name}.weight") for name in ("gate_proj", "up_proj")
    )
    assert torch.equal(model.model.layers[1].mlp.gate_up_proj.weight, torch.cat((gate, up)))


def test_glm4_fused_gate_up_loads_as_is(tmp_path: Path) -> None:
    model, weights = checkpoint("glm4", tmp_path)
    model.load_weights(weights)
    stored = tensor_named(weights, "model.layers.0.mlp.gate_up_proj.weight")
    assert torch.equal(model.model.layers[0].mlp.gate_up_proj.weight, stored)
    assert torch.equal(
        model.model.layers[0].self_attn.qkv_proj.bias[:64],
        tensor_named(weights, "model.layers.0.self_attn.q_proj.bias"),
    )


def test_tied_head_shares_the_embedding_and_ignores_a_stored_copy(tmp_path: Path) -> None:
    model, weights = checkpoint("qwen2", tmp_path, tie_word_embeddings=True)
    embedding = tensor_named(weights, "model.embed_tokens.weight")
    model.load_weights([*weights, ("lm_head.weight", torch.zeros_like(embedding))])
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert torch.allclose(model.compute_logits(embedding[:3]), embedding[:3] @ embedding.T, atol=1e-6)


def test_recomputed_rotary_buffers_are_ignored(llama) -> None:
    model, weights = llama
    computed = model.model.rotary_emb.inv_freq.clone()
    model.load_weights([*weights, ("model.rotary_emb.inv_freq", torch.zeros(8))])
    assert computed.count_nonzero() == computed.numel()
    assert torch.equal(model.model.rotary_emb.inv_freq, computed)


def test_wrong_shape_names_tensor_and_both_shapes(llama) -> None:
    model, weights = llama
    name = "model.layers.0.self_attn.k_proj.weight"
    bad = [
        (tensor_name, torch.zeros(5, 64) if tensor_name == name else tensor)
        for tensor_name, tensor in weights
    ]
    with pytest.raises(ValueError, match=rf"'{name}' has shape \(5, 64\), but the model expects \(32, 64\)"):
        model.load_weights(bad)


def test_unknown_tensor_is_named(llama) -> None:
    model, weights = llama
    with pytest.raises(ValueError, match="'model.layers.0.self_attn.rope_proj.weight' matches no parameter"):
        model.load_weights([*weights, ("model.layers.0.self_attn.rope_proj.weight", torch.zeros(4))])


@pytest.mark.parametrize(
    ("left_out", "reported"),
    [
        ("model.layers.1.mlp.down_proj.weight", "model.layers.1.mlp.down_proj.weight"),
        ("model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.qkv_proj.weight"),
        ("lm_head.weight", "lm_head.weight"),
    ],
)
def test_parameter_never_loaded_is_named(llama, left_out: str, reported: str) -> None:
    model, weights = llama
    with pytest.raises(ValueError, match=f"checkpoint has no weights for: {reported}$"):
        model.load_weights([(name, tensor) for name, tensor in weights if name != left_out])


def test_tensor_given_twice_is_refused(llama) -> None:
    model, weights = llama
    duplicate = (
        "model.layers.0.self_attn.q_proj.weight",
        tensor_named(weights, "model.layers.0.self_attn.q_proj.weight"),
    )
    with pytest.raises(
        ValueError, match="loads rows of 'model.layers.0.self_attn.qkv_proj.weight' that were already"
    ):
        model.load_weights([*weights, duplicate])


def test_a_projection_given_both_fused_and_split_is_refused(tmp_path: Path) -> None:
    model, weights = checkpoint("glm4", tmp_path)
    gate_half = tensor_named(weights, "model.layers.0.mlp.gate_up_proj.weight")[:128]
    with pytest.raises(ValueError, match="loads rows of 'model.layers.0.mlp.gate_up_proj.weight' that were already"):
        model.load_weights([*weights, ("model.layers.0.mlp.gate_proj.weight", gate_half)])
