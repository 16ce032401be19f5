"""A step's routed (token, expert) pairs grouped by expert, so that each expert's rows are one contiguous slice.

Every expert method multiplies the same way around this: gather the tokens' rows in expert order, run each
expert over its slice (reading its weights once for all of them), then add each row, times its routing
weight, back into its token's output. Rows are sorted stably, so a token's rows keep their order and its sum
does not depend on which other tokens share the step. A pair routed to an expert id past the layer's last (an
expert another rank holds) makes no row.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ExpertGroups:
    """The ``T * k`` routed rows of a step in expert order, and where each expert's slice ends."""

    token_of_row: torch.Tensor  # [T * k] int64: the token each row is a copy of
    row_weights: torch.Tensor  # [T * k] float32: the routing weight of each row
    ends: torch.Tensor  # [num_experts] int32: one past each expert's last row (a cumulative count)
    num_tokens: int

    @classmethod
    def of(cls, topk_ids: torch.Tensor, topk_weights: torch.Tensor, num_experts: int) -> ExpertGroups:
        """Group the routing of ``T`` tokens to ``k`` experts each (``topk_ids``, ``topk_weights`` ``[T, k]``);
        ids ``num_experts`` and above are left out."""
        expert_of_pair = topk_ids.flatten()
        order = expert_of_pair.argsort(stable=True)
        counts = torch.bincount(expert_of_pair, minlength=num_experts)
        if counts.shape[0] > num_experts:  # pairs of experts held elsewhere, which sort last
            counts = counts[:num_experts]
            order = order[:int(counts.sum())]
        ends = counts.cumsum(0, dtype=torch.int32)
        return cls(token_of_row=order // topk_ids.shape[1], row_weights=topk_weights.flatten()[order].float(),
                   ends=ends, num_tokens=topk_ids.shape[0])

    def gather(self, hidden: torch.Tensor) -> torch.Tensor:
        """Each row's input: its token's ``hidden`` row, ``[T * k, hidden_size]`` in expert order."""
        return hidden.index_select(0, self.token_of_row)

    def combine(self, rows: torch.Tensor) -> torch.Tensor:
        """The weighted sum of each token's rows ``[T, hidden_size]``, added in float32 and returned in
        ``rows``' dtype."""
        weighted = rows.float() * self.row_weights[:, None]
        summed = weighted.new_zeros(self.num_tokens, rows.shape[1]).index_add_(0, self.token_of_row, weighted)
        return summed.to(rows.dtype)
