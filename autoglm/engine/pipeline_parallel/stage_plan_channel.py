"""The engine hands each step's plan to every other rank of a pipeline, point to point.

A broadcast would hold the engine until every stage took the plan, and a stage takes it only once
its previous batch is through: the engine could never run one batch while a stage runs the next.
So each plan goes out as non-blocking sends (a header, then the payload) that the engine does not
wait for; each rank reads its plans in order. The same interface as the tensor-parallel
:class:`PlanChannel`, so that the worker loop and the worker group serve both.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from autoglm.engine.tensor_parallel.plan_codec import Header, MessageKind, decode_plan, empty_header, encode_plan
from autoglm.step_plan import StepPlan

# Plans travel under their own tag, apart from the activations on the same pairs of ranks.
PLAN_TAG = 1


class StagePlanChannel:
    def __init__(self, group: dist.ProcessGroup, engine_rank: int, worker_ranks: list[int]) -> None:
        self.group = group
        self.engine_rank = engine_rank
        self.worker_ranks = worker_ranks
        self._sends: list[tuple[dist.Work, torch.Tensor]] = []  # under way, with the tensors they must keep

    def send(self, plan: StepPlan) -> None:
        header, payload = encode_plan(plan)
        self._send_all(header, payload)

    def send_stop(self) -> None:
        """Tell every worker to leave its loop, without waiting: the worker group waits for the workers to exit,
        and ends those that do not (a rank that waits for a step the engine dropped never reads its stop)."""
        self._send_all(Header(MessageKind.STOP).to_tensor())

    def receive(self) -> StepPlan | None:
        """The next plan; None once the engine has sent stop."""
        header = Header.from_tensor(self._receive(empty_header()))
        if header.kind is MessageKind.STOP:
            return None
        return decode_plan(header, self._receive(torch.empty(header.payload_len, dtype=torch.long)))

    def share(self, value: int | None = None) -> int:
        """The engine's ``value`` on every rank (workers pass None), as the tensor-parallel channel's."""
        tensor = torch.tensor([0 if value is None else value], dtype=torch.long)
        dist.broadcast(tensor, src=self.engine_rank, group=self.group)
        return int(tensor.item())

    def _send_all(self, *tensors: torch.Tensor) -> None:
        self._sends[:] = [(work, tensor) for work, tensor in self._sends if not work.is_completed()]
        for rank in self.worker_ranks:
            for tensor in tensors:
                self._sends.append((dist.isend(tensor, dst=rank, group=self.group, tag=PLAN_TAG), tensor))

    def _receive(self, tensor: torch.Tensor) -> torch.Tensor:
        dist.recv(tensor, src=self.engine_rank, group=self.group, tag=PLAN_TAG)
        return tensor
