"""Which projections quantization takes: every decoder projection, the LM head only when asked, never the embedding."""
from __future__ import annotations

import pytest
import torch

from autoglm.models import ModelConfig, load_model
from autoglm.models.linear_method import LinearMethods, WeightQuantization, with_int_weights
from tests.tiny_models import make_tiny_checkpoint


def load_quantized(model_dir, quantize_lm_head: bool):
    config = ModelConfig.from_pretrained(model_dir)
    quantization = WeightQuantization.from_settings("int8", quantize_lm_head=quantize_lm_head)
    methods = with_int_weights(LinearMethods(), config, quantization, torch.float32, torch.float32)
    return load_model(model_dir, torch.float32, torch.device("cpu"), config, methods)[0]


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("quantize_lm_head", [False, True])
def test_the_lm_head_is_quantized_only_when_asked_and_the_embedding_never(tied: bool, quantize_lm_head: bool,
                                                                          tmp_path) -> None:
    model_dir = make_tiny_checkpoint("qwen2", tmp_path, tie_word_embeddings=tied)
    model = load_quantized(model_dir, quantize_lm_head)
    assert model.model.embed_tokens.weight.dtype == torch.float32
    assert hasattr(model.lm_head, "qweight") == quantize_lm_head
    assert hasattr(model.lm_head, "weight") != quantize_lm_head
    projections = [module for name, module in model.named_modules() if name.endswith(("qkv_proj", "down_proj"))]
    assert projections and all(module.qweight.dtype == torch.int8 for module in projections)
    logits = model.compute_logits(model(torch.tensor([5, 6, 7]), torch.arange(3)))
    assert logits.shape == (3, 320) and bool(torch.isfinite(logits).all())
