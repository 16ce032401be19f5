"""Expert weights kept as the checkpoint gives them, in the model's dtype, multiplied by PyTorch's grouped matmul.

Each projection of all a step's routed rows is one ``F.grouped_mm`` over the rows grouped by expert: one native
call that reads each expert's weight once for all its rows, with no Python loop over tokens or experts.
Measured against the alternatives at a scaled shape (hidden 2048, expert intermediate 768, 128 experts, top-8:
one layer's experts, 1.2 GB in bfloat16; random routing) on a 2-core AMD EPYC (Zen 4: AVX512-BF16,
no AMX; a shared machine, so the least of 25 interleaved rounds, 80 for one token, 6 for 256), ms per layer:

    tokens  dtype     grouped_mm  loop over active experts  bmm over padded groups  bmm over the k gathered experts
    1       float32      11.2          11.1                    170                     127
    8       float32      77.6          84.2                    543                     592
    256     float32     401           414                     1663                       -
    1       bfloat16      8.1           7.8                     34.5                    32.4
    8       bfloat16     35.7          41.4                    279                     326
    256     bfloat16    149           152                      760                       -

The grouped matmul is best at 8 tokens and ties the Python loop over the experts that received tokens at 1 and
256 (for one token the loop saves the grouped call's pass over empty groups, under 4%); padding the groups or
gathering each token's experts copies their weights, several times the bytes.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autoglm.models.expert_method.base import ExpertMethod
from autoglm.models.expert_method.expert_groups import ExpertGroups
from autoglm.models.fused_ops import silu_and_mul
from autoglm.models.parameters import stacked_experts_parameter


class UnquantizedExpertMethod(ExpertMethod):
    """``gate_up_proj`` ``[experts, 2 * intermediate, hidden]`` (each expert's gate rows, then its up rows) and
    ``down_proj`` ``[experts, hidden, intermediate]``: transformers 5's fused layout, which its fused checkpoint
    names load as they are."""

    def create_weights(self, layer: nn.Module, num_experts: int, hidden_size: int, intermediate_size: int,
                       params_dtype: torch.dtype) -> None:
        layer.register_parameter("gate_up_proj", stacked_experts_parameter(
            num_experts, {"gate_proj.weight": intermediate_size, "up_proj.weight": intermediate_size}, hidden_size,
            dtype=params_dtype))
        layer.register_parameter("down_proj", stacked_experts_parameter(
            num_experts, {"down_proj.weight": hidden_size}, intermediate_size, dtype=params_dtype))

    def apply(self, layer: nn.Module, hidden: torch.Tensor, topk_ids: torch.Tensor,
              topk_weights: torch.Tensor) -> torch.Tensor:
        groups = ExpertGroups.of(topk_ids, topk_weights, layer.gate_up_proj.shape[0])
        gate_up = F.grouped_mm(groups.gather(hidden), layer.gate_up_proj.transpose(1, 2), offs=groups.ends)
        down = F.grouped_mm(silu_and_mul(gate_up), layer.down_proj.transpose(1, 2), offs=groups.ends)
        return groups.combine(down)
