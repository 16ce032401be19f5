"""Checkpoints for the quantization tests: a dequantized-float reference, and one the compressed-tensors
package writes with its own compressor and its own scales (not through ``autoglm quantize``)."""
from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from autoglm.models.linear_method import WeightQuantization
from autoglm.quantize.report import dequantized_copy


def save_dequantized_reference(model_dir: Path, quantization: WeightQuantization, out_dir: Path) -> Path:
    """``model_dir`` with every quantized projection's weight replaced by its dequantized values, float32."""
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    dequantized_copy(model, quantization).save_pretrained(str(out_dir))
    return out_dir


def save_with_package_compressor(model_dir: Path, bits: int, group_size: int | None, out_dir: Path) -> Path:
    """What llm-compressor does for a W8A16/W4A16 scheme: the package's observers' min/max to scales
    (``calculate_qparams``), then its ``ModelCompressor`` writes the format and the config."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig, QuantizationScheme,
                                                 apply_quantization_config)
    from compressed_tensors.quantization.utils.helpers import calculate_qparams

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    args = QuantizationArgs(num_bits=bits, type="int", symmetric=True, group_size=group_size,
                            strategy="channel" if group_size is None else "group")
    config = QuantizationConfig(config_groups={"group_0": QuantizationScheme(targets=["Linear"], weights=args)},
                                ignore=["lm_head"])
    apply_quantization_config(model, config)
    with torch.no_grad():
        for module in model.modules():
            if not hasattr(module, "weight_scale"):
                continue
            weight = module.weight
            groups = weight.reshape(weight.shape[0], -1, group_size or weight.shape[1])
            scale, zero_point = calculate_qparams(groups.amin(-1), groups.amax(-1), args)
            module.weight_scale.copy_(scale.reshape(module.weight_scale.shape))
            module.weight_zero_point.copy_(zero_point.reshape(module.weight_zero_point.shape))
    compressor = ModelCompressor.from_pretrained_model(
        model, quantization_format="pack-quantized" if bits == 4 else "int-quantized")
    compressor.compress_model(model)
    model.save_pretrained(str(out_dir))
    compressor.update_config(str(out_dir))
    AutoTokenizer.from_pretrained(str(model_dir)).save_pretrained(str(out_dir))
    return out_dir
