"""What int8/int4 expert weights become once loaded, and how each step multiplies by them (W8A16, W4A16).

Two methods produce them, as for the linear layers: quantizing a float checkpoint's experts at load time, and
reading a compressed-tensors checkpoint's. Both end in :meth:`IntWeightExpertMethod.install`, which stores each
projection's integer values and scales stacked over the experts, in the layout of the kernel the linear
methods pick for that format on this device (``int_weight_method.kernel_for``); the float weights are gone.

Each step runs every expert that received rows once, over all its rows, through that kernel: the CPU's fused
integer-weight ops read one byte (int8) or half a byte (int4) per weight. Measured against dequantizing each active
expert then a matmul, and against dequantizing the active experts into one ``F.grouped_mm`` (the float path), at
a scaled shape (hidden 2048, expert intermediate 768, 128 experts, top-8, random routing; int8 per output
channel, int4 in groups of 128; the least of 9 interleaved rounds, 3 for 64 tokens, 15 and 5 for float32) on a
2-core AMD EPYC (Zen 4: AVX512-BF16, no AMX; a shared machine under a load of 2 to 6, so only the ordering is
firm), ms per layer:

    weights  activations  tokens  fused op per active expert  dequantize per active expert  into grouped_mm
    int8     bfloat16       1              2.9                          9.6                       16.2
    int8     bfloat16       8             21.8                         56.9                      105
    int8     bfloat16      64             77.5                        171                        576
    int4     bfloat16       1              6.6                         22.0                       56.0
    int4     bfloat16       8             11.9                         75.1                      221
    int4     bfloat16      64             54.2                        183                        836
    int8     float32        1             94.1                        328                        647
    int8     float32        8            219                          634                       1160
    int8     float32       64           2287                         2184                       4528
    int4     float32        1             93.7                        206                        382
    int4     float32        8            289                          629                       1058

The fused ops win everywhere but at 64 tokens in float32, where the two loops over the experts trade places from
run to run (PyTorch's fused ops are slow on float32 activations: a float32 checkpoint is exact but slow, as for
the linear methods). Gathering the active experts' dequantized weights for one grouped call costs more than it
saves at every size. So the linear methods' choice holds for the experts too: above :data:`INT8_FUSED_MAX_ROWS`
rows of one expert int8 dequantizes (compute-bound there), and int4's packed layout runs fused at every row
count.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from autoglm.models.expert_method.base import ExpertMethod
from autoglm.models.expert_method.expert_groups import ExpertGroups
from autoglm.models.fused_ops import silu_and_mul
from autoglm.models.linear_method.int_kernels import (
    INT8_FUSED_MAX_ROWS,
    dequantized_linear,
    int4_fused_linear,
    int8_fused_linear,
    pack_int4,
)
from autoglm.models.linear_method.int_weight_method import IntKernel, kernel_for
from autoglm.models.linear_method.int_weights import IntWeightFormat

# The two stacked projections of every layer of experts, by the prefix of their buffers' names.
GATE_UP, DOWN = "gate_up", "down"
# The ``[experts, out, in]`` of each stacked integer weight before packing, for counting parameters.
QUANTIZED_EXPERT_SHAPES = "quantized_expert_shapes"


@dataclass(frozen=True)
class ExpertProjection:
    """One projection's integer weights as a layer's buffers hold them, stacked over the experts."""

    kernel: IntKernel
    weights: torch.Tensor  # [experts, out, in] int8, or each expert's int4 pack stacked
    scales: torch.Tensor  # [experts, out, groups]; int4 fused: each expert's scales-and-zeros stacked
    channel_scales: torch.Tensor | None  # [experts, out] in the fused dtype, for the int8 fused op only
    out_features: int

    @classmethod
    def of(cls, layer: nn.Module, name: str) -> ExpertProjection:
        kernel = layer.int_kernels[name]
        shape = getattr(layer, QUANTIZED_EXPERT_SHAPES)[name]
        return cls(kernel, getattr(layer, f"{name}_qweight"), getattr(layer, f"{name}_scale"),
                   getattr(layer, f"{name}_channel_scale", None), shape[1])


class IntWeightExpertMethod(ExpertMethod):
    """Multiplies by the integer expert weights :meth:`install` leaves on a layer; subclasses create and fill them."""

    def __init__(self, weight_format: IntWeightFormat, fused_dtype: torch.dtype | None = None) -> None:
        self.weight_format = weight_format
        self.fused_dtype = fused_dtype

    def install(self, layer: nn.Module, quantized: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Replace the layer's loaded parameters by each projection's ``(q [experts, out, in] int8,
        scale [experts, out, groups])`` (keys ``GATE_UP``, ``DOWN``) as buffers in this device's kernel layout."""
        for name, _ in list(layer.named_parameters(recurse=False)):
            delattr(layer, name)
        setattr(layer, QUANTIZED_EXPERT_SHAPES, {name: q.shape for name, (q, _) in quantized.items()})
        layer.int_kernels = {}
        for name, (q, scale) in quantized.items():
            self._install_projection(layer, name, q, scale)

    def _install_projection(self, layer: nn.Module, name: str, q: torch.Tensor, scale: torch.Tensor) -> None:
        group_size = q.shape[2] // scale.shape[2]
        kernel = layer.int_kernels[name] = kernel_for(self.weight_format, q.device, group_size, q.shape[2])
        fused_scale = scale.to(self.fused_dtype or scale.dtype)
        if kernel is IntKernel.INT4_FUSED:
            packs = [pack_int4(q[expert], fused_scale[expert]) for expert in range(q.shape[0])]
            layer.register_buffer(f"{name}_qweight", torch.stack([packed for packed, _ in packs]))
            layer.register_buffer(f"{name}_scale", torch.stack([scales for _, scales in packs]))
            return
        layer.register_buffer(f"{name}_qweight", q.contiguous())
        layer.register_buffer(f"{name}_scale", scale.contiguous())
        if kernel is IntKernel.INT8_FUSED:
            layer.register_buffer(f"{name}_channel_scale", fused_scale[:, :, 0].contiguous())

    def apply(self, layer: nn.Module, hidden: torch.Tensor, topk_ids: torch.Tensor,
              topk_weights: torch.Tensor) -> torch.Tensor:
        gate_up, down = ExpertProjection.of(layer, GATE_UP), ExpertProjection.of(layer, DOWN)
        groups = ExpertGroups.of(topk_ids, topk_weights, gate_up.weights.shape[0])
        starts = [0, *groups.ends.tolist()]
        slices = [(expert, start, end) for expert, (start, end) in enumerate(zip(starts, starts[1:])) if end > start]
        intermediate = self._project(gate_up, groups.gather(hidden), slices)
        return groups.combine(self._project(down, silu_and_mul(intermediate), slices))

    def _project(self, projection: ExpertProjection, rows: torch.Tensor,
                 slices: list[tuple[int, int, int]]) -> torch.Tensor:
        """Each expert's slice of ``rows`` times that expert's weight, every expert's weight read once."""
        out = rows.new_empty(rows.shape[0], projection.out_features)
        for expert, start, end in slices:
            out[start:end] = self._expert_linear(projection, expert, rows[start:end])
        return out

    def _expert_linear(self, projection: ExpertProjection, expert: int, x: torch.Tensor) -> torch.Tensor:
        kernel = projection.kernel
        if kernel is IntKernel.DEQUANTIZE or (kernel is IntKernel.INT8_FUSED and x.shape[0] > INT8_FUSED_MAX_ROWS):
            return dequantized_linear(x, projection.weights[expert], projection.scales[expert])
        fused_x = x if self.fused_dtype is None else x.to(self.fused_dtype)
        if kernel is IntKernel.INT8_FUSED:
            return int8_fused_linear(fused_x, projection.weights[expert], projection.channel_scales[expert]).to(x.dtype)
        return int4_fused_linear(fused_x, projection.weights[expert], projection.scales[expert]).to(x.dtype)
