"""The interface every attention implementation offers the runner and the attention layers."""
from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from autoglm.attention.layer_kv_cache import LayerKVCache
from autoglm.attention.metadata import AttentionMetadata
from autoglm.device_transfer import tensor_to_device, to_device
from autoglm.step_plan import StepPlan


class AttentionBackend(ABC):
    """Turns a step plan into metadata once per step, then runs each layer's attention with it.

    A backend that ``supports_graph_capture`` reads nothing from the host that changes between steps
    of one batch size (no ``host_`` list, no shape taken from lengths), so a captured decode step
    replays correctly once the runner refills the buffers its metadata views.
    """

    name: str = "abstract"
    supports_graph_capture: bool = False

    def build_metadata(self, plan: StepPlan, device: torch.device) -> AttentionMetadata:
        """Flat varlen metadata on ``device``, from the plan's CPU tensors and lists."""
        cu_seqlens_q = plan.cu_seqlens_q()
        return AttentionMetadata(
            slot_mapping=tensor_to_device(plan.slot_mapping, device),
            block_size=plan.block_size,
            cu_seqlens_q=to_device(cu_seqlens_q, device, torch.long),
            seq_lens=to_device(plan.seq_lens, device, torch.long),
            block_tables=tensor_to_device(plan.block_tables, device),
            num_decode_tokens=plan.num_decode_tokens,
            max_query_len=max(plan.query_lens, default=0),
            max_seq_len=max(plan.seq_lens, default=0),
            host_cu_seqlens_q=cu_seqlens_q,
            host_seq_lens=list(plan.seq_lens),
        )

    def decodes_in_place(self, kv_cache: LayerKVCache, dtype: torch.dtype) -> bool:
        """Whether this backend attends decode queries of ``dtype`` over ``kv_cache`` with the compiled
        kernel the native decode step calls (``kernels/decode_step.cpp``), so that step may stand in for it."""
        return False

    @abstractmethod
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv_cache: LayerKVCache, scale: float,
                metadata: AttentionMetadata) -> torch.Tensor:
        """Write this step's K/V (``[T, Hkv, D]``) into one layer's ``kv_cache`` slots, then attend each
        query (``[T, H, D]``) over its row's context with ``scale``; returns ``[T, H, D]``."""
