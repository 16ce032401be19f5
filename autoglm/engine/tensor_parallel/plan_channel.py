"""Rank 0 hands each step's plan to every worker: a header broadcast, then the payload broadcast.

The plans travel on a gloo group of their own, on the CPU where they are built, whatever the
model's collectives run on (NCCL takes device tensors only).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from autoglm.engine.tensor_parallel.plan_codec import Header, MessageKind, decode_plan, empty_header, encode_plan
from autoglm.step_plan import StepPlan

SOURCE_RANK = 0


class PlanChannel:
    """Collective: every rank of ``group`` calls its side in the same order (rank 0 sends, workers receive)."""

    def __init__(self, group: dist.ProcessGroup) -> None:
        self.group = group

    def send(self, plan: StepPlan) -> None:
        header, payload = encode_plan(plan)
        self._broadcast(header)
        self._broadcast(payload)

    def send_stop(self) -> None:
        self._broadcast(Header(MessageKind.STOP).to_tensor())

    def receive(self) -> StepPlan | None:
        """The next plan; None once rank 0 has sent stop."""
        header = Header.from_tensor(self._broadcast(empty_header()))
        if header.kind is MessageKind.STOP:
            return None
        payload = self._broadcast(torch.empty(header.payload_len, dtype=torch.long))
        return decode_plan(header, payload)

    def share(self, value: int | None = None) -> int:
        """Rank 0's ``value`` on every rank (workers pass None): a setting rank 0 decides, such as the KV blocks."""
        tensor = torch.tensor([0 if value is None else value], dtype=torch.long)
        return int(self._broadcast(tensor).item())

    def _broadcast(self, tensor: torch.Tensor) -> torch.Tensor:
        dist.broadcast(tensor, src=SOURCE_RANK, group=self.group)
        return tensor
