"""A checkpoint's quantization_config: what loads, and a clear error for everything else."""
from __future__ import annotations

import copy
import json
import sys
from typing import Any

import pytest

from autoglm import LLM
from autoglm.models.linear_method import compressed_tensors
from autoglm.models.linear_method.int_weights import IntWeightFormat
from autoglm.models.quantization_config import CheckpointQuantization, parse_quantization_config
from tests.tiny_models import make_tiny_checkpoint

W4A16: dict[str, Any] = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "output_activations": None,
                                  "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
                                              "group_size": 128, "dynamic": False}}},
    "ignore": ["lm_head"],
}


def with_changes(path: str, value: Any) -> dict[str, Any]:
    """W4A16 with the value at a dotted ``path`` replaced."""
    config = copy.deepcopy(W4A16)
    *parents, key = path.split(".")
    target = config
    for parent in parents:
        target = target[parent]
    target[key] = value
    return config


def test_a_w4a16_config_parses() -> None:
    assert parse_quantization_config(W4A16, "config.json") == CheckpointQuantization(
        IntWeightFormat(4, 128), packed=True, quantize_lm_head=False)
    w8 = with_changes("config_groups.group_0.weights", {"num_bits": 8, "type": "int", "symmetric": True,
                                                        "strategy": "channel", "group_size": None})
    w8["format"] = "int-quantized"
    w8["ignore"] = []
    assert parse_quantization_config(w8, "config.json") == CheckpointQuantization(
        IntWeightFormat(8, None), packed=False, quantize_lm_head=True)


@pytest.mark.parametrize("path,value,message", [
    ("quant_method", "gptq", "quant_method 'gptq' is not supported; this engine reads 'compressed-tensors'"),
    ("config_groups", {}, "'config_groups' must hold exactly one scheme"),
    ("config_groups.group_0.input_activations", {"num_bits": 8}, "quantized activations are not supported"),
    ("config_groups.group_0.targets", ["Embedding"], "only \\[\"Linear\"\\] is supported"),
    ("config_groups.group_0.weights.num_bits", 3, "num_bits is 3; supported: 4, 8"),
    ("config_groups.group_0.weights.symmetric", False, "symmetric is False; only True is supported"),
    ("config_groups.group_0.weights.type", "float", "type is 'float'; only 'int' is supported"),
    ("config_groups.group_0.weights.strategy", "tensor", "strategy is 'tensor'; supported: channel, group"),
    ("config_groups.group_0.weights.group_size", None, "group_size must be a positive integer"),
    ("format", "int-quantized", "format 'int-quantized' cannot hold 4-bit weights; expected 'pack-quantized'"),
    ("ignore", ["model.layers.0.mlp.down_proj"], "'ignore' may name only 'lm_head'"),
])
def test_each_unsupported_or_corrupt_value_is_named(path: str, value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=f"config.json: quantization_config.*{message}"):
        parse_quantization_config(with_changes(path, value), "config.json")


def test_a_corrupt_quantization_config_fails_the_load_naming_the_file(tmp_path) -> None:
    model_dir = make_tiny_checkpoint("qwen2", tmp_path)
    config = json.loads((model_dir / "config.json").read_text())
    config["quantization_config"] = "int8"
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"config.json: quantization_config must be a JSON object, got 'int8'"):
        LLM(model=str(model_dir), device="cpu")


def test_a_non_dividing_group_size_fails_the_load_naming_the_layer(tmp_path) -> None:
    model_dir = make_tiny_checkpoint("qwen2", tmp_path)  # hidden 64, intermediate 128
    with pytest.raises(ValueError, match=r"layer 'model.layers.0.self_attn.qkv_proj': quantization group size 48 "
                                         r"does not divide the input size 64; group sizes that do: 16, 32, 64"):
        LLM(model=str(model_dir), device="cpu", quantization="int4", quantization_group_size=48)


def test_a_quantized_checkpoint_refuses_another_bit_width(tmp_path) -> None:
    from tests.models.quantized_checkpoints import save_with_package_compressor

    compressed = save_with_package_compressor(make_tiny_checkpoint("qwen2", tmp_path / "float"), 8, None,
                                              tmp_path / "compressed")
    with pytest.raises(ValueError, match="already quantized to 8-bit weights; set quantization to none"):
        LLM(model=str(compressed), device="cpu", quantization="int4")


def test_an_int4_checkpoint_without_the_package_says_which_extra_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "compressed_tensors.compressors.pack_quantized.helpers", None)  # as if absent
    with pytest.raises(ValueError, match=r"needs the compressed-tensors package: pip install 'open-autoglm\[quant\]'"):
        compressed_tensors.int4_unpacker()


def test_autoglm_quantize_without_the_package_says_which_extra_to_install(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "compressed_tensors", None)
    from autoglm.models.linear_method import WeightQuantization
    from autoglm.quantize.writer import quantize_checkpoint

    with pytest.raises(ValueError, match=r"autoglm quantize needs the compressed-tensors package"):
        quantize_checkpoint(tmp_path / "in", tmp_path / "out", WeightQuantization.from_settings("int8", None, False))
