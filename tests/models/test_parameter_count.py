"""A model's parameter count is its checkpoint's, whatever its weights became: int8 and packed int4 count
one per value, and a tied LM head quantized apart from its embedding counts once."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from autoglm.models.linear import Linear, LMHead
from autoglm.models.linear_method import UnquantizedLinearMethod, process_weights_after_loading
from autoglm.models.linear_method.int_weights import IntWeightFormat
from autoglm.models.linear_method.quantize_at_load import QuantizeAtLoadLinearMethod
from autoglm.models.parameter_count import count_parameters

IN_FEATURES, OUT_FEATURES, VOCAB = 256, 96, 64


def loaded_linear(method) -> Linear:
    layer = Linear(IN_FEATURES, OUT_FEATURES, True, method)
    layer.weight.weight_loader(layer.weight, torch.randn(OUT_FEATURES, IN_FEATURES))
    layer.bias.weight_loader(layer.bias, torch.randn(OUT_FEATURES))
    process_weights_after_loading(layer)
    return layer


@pytest.mark.parametrize("weight_format", [IntWeightFormat(8), IntWeightFormat(4, 32)], ids=["int8", "int4"])
def test_integer_weights_count_as_the_float_weights_they_replace(weight_format):
    quantized = loaded_linear(QuantizeAtLoadLinearMethod(weight_format))
    float_layer = loaded_linear(UnquantizedLinearMethod())
    assert count_parameters(quantized) == count_parameters(float_layer) == OUT_FEATURES * IN_FEATURES + OUT_FEATURES
    stored = sum(parameter.numel() for parameter in quantized.parameters())
    assert stored == OUT_FEATURES  # the bias: the integer weights are no parameters


def test_int4_packed_two_to_a_byte_still_counts_every_value():
    layer = loaded_linear(QuantizeAtLoadLinearMethod(IntWeightFormat(4, 32)))
    if layer.qweight.numel() == OUT_FEATURES * IN_FEATURES:
        pytest.skip("this device keeps int4 values one to a byte")
    assert count_parameters(layer) == OUT_FEATURES * IN_FEATURES + OUT_FEATURES


def test_a_tied_lm_head_quantized_apart_counts_once():
    model = nn.Module()
    model.embed_tokens = nn.Embedding(VOCAB, IN_FEATURES)
    model.lm_head = LMHead(IN_FEATURES, VOCAB, QuantizeAtLoadLinearMethod(IntWeightFormat(8)),
                           tied_weight=model.embed_tokens.weight)
    process_weights_after_loading(model)
    assert hasattr(model.lm_head, "qweight")  # the head holds its own integer copy
    assert count_parameters(model) == VOCAB * IN_FEATURES
