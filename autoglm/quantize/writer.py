"""Write a float checkpoint's projections (a mixture-of-experts model's routed experts included) as int8/int4 in
the ``compressed-tensors`` format, through that package.

The package lays the checkpoint out (tensor names, int4 packing, ``quantization_config``) exactly as
llm-compressor does, so vLLM, transformers and this engine all read it. The scales are the ones the
engine computes when it quantizes at load time (see ``int_weights.quantize``): the same weights either way.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from autoglm.models import ModelConfig
from autoglm.models.linear_method import WeightQuantization
from autoglm.models.linear_method.compressed_tensors import compressed_tensors_module
from autoglm.models.linear_method.int_weights import GroupSizeError, quantize
from autoglm.models.quantization_config import INT_FORMAT, LM_HEAD, PACKED_FORMAT, ROUTER_PATTERN
from autoglm.quantize.experts import check_expert_group_size, compress_saved_experts


def load_float_model(model_dir: str | Path) -> PreTrainedModel:
    """The checkpoint as transformers builds it, in its own dtype, on the CPU."""
    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype="auto").eval()


def quantized_linears(model: nn.Module, quantization: WeightQuantization) -> dict[str, nn.Linear]:
    """The ``nn.Linear`` modules the engine quantizes (the LM head only if asked), checking each one's group size."""
    linears = {}
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear) or (name == LM_HEAD and not quantization.quantize_lm_head):
            continue
        try:
            quantization.weight_format.group_size_for(module.in_features)
        except GroupSizeError as error:
            raise GroupSizeError(f"layer '{name}': {error}") from None
        linears[name] = module
    return linears


def quantize_checkpoint(model_dir: str | Path, out_dir: str | Path, quantization: WeightQuantization) -> Path:
    """Write ``model_dir`` quantized to ``out_dir`` with its tokenizer; returns ``out_dir``."""
    compressed_tensors_module("compressed_tensors", "autoglm quantize")
    from compressed_tensors.compressors import BaseCompressor, ModelCompressor
    from compressed_tensors.quantization import (QuantizationArgs, QuantizationConfig, QuantizationScheme,
                                                 apply_quantization_config)

    model_config = ModelConfig.from_pretrained(model_dir)
    weight_format = quantization.weight_format
    if model_config.moe is not None:
        check_expert_group_size(weight_format, model_config.moe.moe_intermediate_size)
    model = load_float_model(model_dir)
    if quantization.quantize_lm_head and model.config.tie_word_embeddings:
        raise ValueError("the LM head of this model is tied to its embedding, which stays unquantized; "
                         "leave --quantize-lm-head off")
    linears = quantized_linears(model, quantization)
    weights = QuantizationArgs(num_bits=weight_format.bits, type="int", symmetric=True,
                               strategy="channel" if weight_format.group_size is None else "group",
                               group_size=weight_format.group_size)
    scheme = QuantizationScheme(targets=["Linear"], weights=weights)
    ignore = [name for name, module in model.named_modules() if isinstance(module, nn.Linear) and name not in linears]
    if model_config.moe is not None:
        ignore.append(ROUTER_PATTERN)  # the routers stay in full precision, as readers of the format expect
    apply_quantization_config(model, QuantizationConfig(config_groups={"group_0": scheme}, ignore=ignore))
    with torch.no_grad():
        for module in linears.values():
            group_size = weight_format.group_size_for(module.in_features)
            _, scale = quantize(module.weight, weight_format, group_size)
            module.weight_scale.copy_(scale.reshape(module.weight_scale.shape))
            module.weight_zero_point.zero_()
    storage = PACKED_FORMAT if weight_format.bits == 4 else INT_FORMAT
    compressor = ModelCompressor.from_pretrained_model(model, quantization_format=storage)
    compressor.compress_model(model)
    out = Path(out_dir)
    model.save_pretrained(str(out))
    if model_config.moe is not None:
        compress_saved_experts(out, weight_format, scheme, BaseCompressor.get_value_from_registry(storage))
    compressor.update_config(str(out))
    AutoTokenizer.from_pretrained(str(model_dir)).save_pretrained(str(out))
    return out
