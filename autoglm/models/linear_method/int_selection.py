"""Which int8/int4 method a model's projections use: the checkpoint's own quantization, or the settings'."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from autoglm.models.expert_method.compressed_tensors import CompressedTensorsExpertMethod
from autoglm.models.expert_method.quantize_at_load import QuantizeAtLoadExpertMethod
from autoglm.models.linear_method.compressed_tensors import CompressedTensorsLinearMethod
from autoglm.models.linear_method.int_activation_method import Int8ActivationLinearMethod
from autoglm.models.linear_method.int_activation_weights import KERNEL_COLUMN_MULTIPLE
from autoglm.models.linear_method.int_weights import IntWeightFormat
from autoglm.models.linear_method.quantize_at_load import QuantizeAtLoadLinearMethod
from autoglm.models.linear_method.selection import LinearMethods
from autoglm.models.model_config import ModelConfig


INT4_DEFAULT_GROUP_SIZE = 128
W4A8_DEFAULT_GROUP_SIZE = 32  # llama.cpp's Q4_0
# Weights only (W8A16, W4A16), or with activations quantized to int8 per token (W8A8, W4A8).
WEIGHT_BITS = {"int8": 8, "int4": 4, "w8a8": 8, "w4a8": 4}
INT8_ACTIVATION_METHODS = ("w8a8", "w4a8")
QUANTIZATION_METHODS = ("none", *WEIGHT_BITS)


@dataclass(frozen=True)
class WeightQuantization:
    """What the ``quantization`` settings ask of a float checkpoint: quantize its projections at load time."""

    weight_format: IntWeightFormat
    quantize_lm_head: bool = False
    int8_activations: bool = False

    @classmethod
    def from_settings(cls, method: str, group_size: int | None = None,
                      quantize_lm_head: bool = False) -> WeightQuantization | None:
        """None for ``none``; int8 and w8a8 are per output channel, int4 groups of 128 and w4a8 of 32 unless
        ``group_size`` is given (for w8a8/w4a8: 32 or a multiple of 64, what their kernel sums in one pass)."""
        if method not in QUANTIZATION_METHODS:
            raise ValueError(f"unknown quantization method {method!r}; choose one of: {', '.join(QUANTIZATION_METHODS)}")
        if method == "none":
            return None
        bits, int8_activations = WEIGHT_BITS[method], method in INT8_ACTIVATION_METHODS
        if int8_activations and group_size is not None and group_size != 32 and group_size % KERNEL_COLUMN_MULTIPLE:
            raise ValueError(f"quantization_group_size {group_size} does not suit {method}: its int8-activation "
                             f"kernel takes groups of 32 or a multiple of {KERNEL_COLUMN_MULTIPLE} (32, 64, 128, ...)")
        if bits == 4 and group_size is None:
            group_size = W4A8_DEFAULT_GROUP_SIZE if int8_activations else INT4_DEFAULT_GROUP_SIZE
        return cls(IntWeightFormat(bits, group_size), quantize_lm_head, int8_activations)


def with_int_weights(methods: LinearMethods, model_config: ModelConfig, requested: WeightQuantization | None,
                     dtype: torch.dtype, requested_dtype: torch.dtype) -> LinearMethods:
    """``methods`` (the float choice), with int8/int4 ones for the projections a pre-quantized checkpoint or
    ``requested`` quantizes; an LM head left unquantized keeps its float method. A mixture-of-experts model's
    routed experts take the matching expert method (its router stays in float32).

    Where the engine computes a 16-bit checkpoint in float32 (a CPU without half-precision matrix
    instructions), the fused integer kernels still take activations in that 16-bit dtype.
    """
    fused_dtype = requested_dtype if dtype == torch.float32 and requested_dtype != dtype else None
    stored = model_config.quantization
    is_moe = model_config.moe is not None
    if is_moe and requested is not None and requested.int8_activations:
        raise ValueError(f"{model_config.architecture} is a mixture-of-experts model, whose experts have no "
                         "int8-activation kernel: choose quantization int8 or int4 (weights only) for it")
    if stored is not None:
        if requested is not None and requested.int8_activations:
            raise ValueError(f"the checkpoint is already quantized to {stored.weight_format.bits}-bit weights "
                             f"(W{stored.weight_format.bits}A16); w8a8 and w4a8 quantize a float checkpoint as it "
                             f"loads: set quantization to none (or int{stored.weight_format.bits}) to load it")
        if requested is not None and requested.weight_format.bits != stored.weight_format.bits:
            raise ValueError(
                f"the checkpoint is already quantized to {stored.weight_format.bits}-bit weights; set quantization "
                f"to none (or int{stored.weight_format.bits}) to load it"
            )
        if stored.quantize_lm_head and model_config.tie_word_embeddings:
            raise ValueError("a quantized LM head tied to the embedding is not supported; the checkpoint's "
                             "quantization_config must list 'lm_head' under 'ignore'")
        layers = CompressedTensorsLinearMethod(stored.weight_format, stored.packed, fused_dtype)
        experts = (CompressedTensorsExpertMethod(stored.weight_format, stored.packed, fused_dtype) if is_moe
                   else methods.experts)
        return LinearMethods(layers, layers if stored.quantize_lm_head else methods.lm_head, experts)
    if requested is None:
        return methods
    if requested.int8_activations:
        layers = Int8ActivationLinearMethod(requested.weight_format)
    else:
        layers = QuantizeAtLoadLinearMethod(requested.weight_format, fused_dtype)
    experts = QuantizeAtLoadExpertMethod(requested.weight_format, fused_dtype) if is_moe else methods.experts
    return LinearMethods(layers, layers if requested.quantize_lm_head else methods.lm_head, experts)
