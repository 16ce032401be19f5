"""The interface every way of storing and multiplying a layer's routed experts implements."""
from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import nn


class ExpertMethod(ABC):
    """Creates the stacked weights of a layer's experts, post-processes them once loaded, and computes the
    routed experts' weighted sum from them. One instance serves every sparse layer: what differs per layer
    lives on the layer (``FusedExperts``).

    Each weight parameter stacks the experts on its first dim and carries ``expert_checkpoint_names`` (see
    ``parameters.stacked_experts_parameter``), so that the checkpoint's per-expert tensors find their rows.
    """

    @abstractmethod
    def create_weights(self, layer: nn.Module, num_experts: int, hidden_size: int, intermediate_size: int,
                       params_dtype: torch.dtype) -> None:
        """Register on ``layer`` the weights of ``num_experts`` gated MLPs ``hidden -> intermediate -> hidden``."""

    def process_weights_after_loading(self, layer: nn.Module) -> None:
        """Turn the loaded checkpoint values into what :meth:`apply` reads (pack, copy, transpose)."""

    @abstractmethod
    def apply(self, layer: nn.Module, hidden: torch.Tensor, topk_ids: torch.Tensor,
              topk_weights: torch.Tensor) -> torch.Tensor:
        """``sum_j topk_weights[t, j] * expert[topk_ids[t, j]](hidden[t])`` for each token ``t``: ``hidden``
        ``[T, hidden_size]``, ``topk_ids`` ``[T, k]`` indices of the layer's experts, ``topk_weights`` ``[T, k]``
        float32; the result ``[T, hidden_size]`` in ``hidden``'s dtype."""
