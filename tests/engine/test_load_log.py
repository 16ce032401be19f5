"""What start-up says of the model it loads, in the words of the settings: the weights' format and the
model's parameter count, never a class name or the bytes its packed weights take."""
from __future__ import annotations

import logging

import pytest
import torch

from autoglm.config import AutoGLMConfig
from autoglm.engine.rank_model import load_rank_model
from autoglm.model_paths import DEFAULT_MODEL_DIR
from autoglm.models import ModelConfig
from autoglm.models.linear_method.int_weights import IntWeightFormat
from autoglm.models.linear_method.quantize_at_load import QuantizeAtLoadLinearMethod

LAYERS = ModelConfig.from_pretrained(DEFAULT_MODEL_DIR).num_hidden_layers


def load_messages(caplog, **settings) -> list[str]:
    with caplog.at_level(logging.INFO, logger="autoglm.engine.rank_model"):
        load_rank_model(AutoGLMConfig(device="cpu", **settings).engine_config(), torch.device("cpu"))
    return [record.getMessage() for record in caplog.records if record.name == "autoglm.engine.rank_model"]


@pytest.mark.parametrize(("quantization", "weights"), [
    ("int8", "int8 weights (W8A16), quantized as they load"),
    ("int4", "int4 weights in groups of 128 (W4A16), quantized as they load"),
    ("w8a8", "int8 weights, int8 activations per token (W8A8), quantized as they load"),
    ("w4a8", "int4 weights in groups of 32, int8 activations per token (W4A8), quantized as they load"),
])
def test_quantized_weights_are_named_by_format_and_count_the_models_parameters(caplog, quantization, weights):
    float_messages = load_messages(caplog)
    caplog.clear()
    loading, loaded = load_messages(caplog, quantization=quantization)
    assert f": {LAYERS} layers of {weights}; LM head: " in loading
    assert "LinearMethod" not in loading
    assert loaded == float_messages[1] == "5.6M parameters loaded"


def test_an_lm_head_computed_as_the_layers_is_said_once(caplog):
    loading, _ = load_messages(caplog, dtype="float32")
    assert loading.endswith(f"on cpu, computing in float32: {LAYERS} layers of float32 weights; LM head: the same")


@pytest.mark.parametrize(("weight_format", "fused_dtype", "computed_in", "said"), [
    (IntWeightFormat(8), None, torch.bfloat16, "int8 weights (W8A16)"),
    (IntWeightFormat(8), None, torch.float32, "int8 weights (W8A32)"),
    (IntWeightFormat(4, 64), torch.bfloat16, torch.float32, "int4 weights in groups of 64 (W4A16)"),
])
def test_integer_weights_name_the_activations_they_multiply(weight_format, fused_dtype, computed_in, said):
    method = QuantizeAtLoadLinearMethod(weight_format, fused_dtype)
    assert method.describe(computed_in) == f"{said}, quantized as they load"


def test_a_cpu_without_half_precision_units_is_named_in_the_settings_words(caplog, monkeypatch):
    monkeypatch.setattr("autoglm.engine.rank_model.compute_dtype", lambda *_: torch.float32)
    with caplog.at_level(logging.WARNING, logger="autoglm.engine.rank_model"):
        load_rank_model(AutoGLMConfig(device="cpu").engine_config(), torch.device("cpu"))
    warnings = [record.getMessage() for record in caplog.records if record.name == "autoglm.engine.rank_model"]
    assert warnings[0].startswith("this CPU has no bfloat16 matrix instructions: computing in float32")
