"""Checkpoints for the quantization tests, both made by the compressed-tensors package, sharing no code with the
engine's quantization: a float reference whose projections the package quantized and dequantized itself, and
a checkpoint the package writes with its own compressor and its own scales (not through ``autoglm quantize``)."""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer


def package_args(bits: int, group_size: int | None):
    """The package's description of a symmetric W8A16/W4A16 weight scheme, per channel or per group."""
    from compressed_tensors.quantization import QuantizationArgs

    return QuantizationArgs(num_bits=bits, type="int", symmetric=True, group_size=group_size,
                            strategy="channel" if group_size is None else "group")


def package_scales(weight: torch.Tensor, args) -> tuple[torch.Tensor, torch.Tensor]:
    """What llm-compressor's min/max observer gives a weight: the package's ``calculate_qparams`` of each group's
    (or row's) extremes, as ``(scale, zero_point)`` of shape ``[out, groups]``."""
    from compressed_tensors.quantization.utils.helpers import calculate_qparams

    groups = weight.reshape(weight.shape[0], -1, args.group_size or weight.shape[1])
    return calculate_qparams(groups.amin(-1), groups.amax(-1), args)


def save_dequantized_reference(model_dir: Path, bits: int, group_size: int | None, out_dir: Path) -> Path:
    """``model_dir`` in float32, each projection but the LM head holding the weight the package's own
    quantize-then-dequantize (``fake_quantize``) makes of it with its own scales."""
    from compressed_tensors.quantization.lifecycle.forward import fake_quantize

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    args = package_args(bits, group_size)
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear) and name != "lm_head":
                module.weight.copy_(fake_quantize(module.weight, *package_scales(module.weight, args), args))
    model.save_pretrained(str(out_dir))
    return out_dir


def save_with_package_compressor(model_dir: Path, bits: int, group_size: int | None, out_dir: Path) -> Path:
    """What llm-compressor does for a W8A16/W4A16 scheme: the package's observers' min/max to scales
    (``calculate_qparams``), then its ``ModelCompressor`` writes the format and the config."""
    from compressed_tensors.compressors import ModelCompressor
    from compressed_tensors.quantization import QuantizationConfig, QuantizationScheme, apply_quantization_config

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    args = package_args(bits, group_size)
    config = QuantizationConfig(config_groups={"group_0": QuantizationScheme(targets=["Linear"], weights=args)},
                                ignore=["lm_head"])
    apply_quantization_config(model, config)
    with torch.no_grad():
        for module in model.modules():
            if not hasattr(module, "weight_scale"):
                continue
            scale, zero_point = package_scales(module.weight, args)
            module.weight_scale.copy_(scale.reshape(module.weight_scale.shape))
            module.weight_zero_point.copy_(zero_point.reshape(module.weight_zero_point.shape))
    compressor = ModelCompressor.from_pretrained_model(
        model, quantization_format="pack-quantized" if bits == 4 else "int-quantized")
    compressor.compress_model(model)
    model.save_pretrained(str(out_dir))
    compressor.update_config(str(out_dir))
    AutoTokenizer.from_pretrained(str(model_dir)).save_pretrained(str(out_dir))
    return out_dir
