"""A launched step's output on its way to the host.

Under async scheduling the engine builds the next step before it reads this one's tokens. The
sampled arrays are copied into pinned host memory with a non-blocking copy and a CUDA event marks
their arrival, so the only wait is :meth:`PendingStepOutput.result`, when the engine needs the
tokens. Elsewhere the copy is a plain one and the output is complete at once.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from autoglm.runner.sampler import SamplerOutput
from autoglm.step_output import StepOutput


@dataclass
class PendingStepOutput:
    """``output`` holds what is already on the host (prompt log-probs); ``sampled`` the sampled rows'
    host arrays, ready once ``copied`` has fired (None: ready now)."""

    output: StepOutput
    sampled: SamplerOutput | None = None
    copied: torch.cuda.Event | None = None

    @classmethod
    def copy_to_host(cls, output: StepOutput, sampled: SamplerOutput) -> PendingStepOutput:
        """Start copying ``sampled`` (on the device) to the host, without waiting on CUDA."""
        asynchronous = sampled.token_ids.device.type == "cuda"
        host = SamplerOutput(**{
            name: None if value is None else value.to("cpu", non_blocking=asynchronous)  # pinned when non-blocking
            for name, value in ((field.name, getattr(sampled, field.name)) for field in dataclasses.fields(sampled))
        })
        copied = None
        if asynchronous:
            copied = torch.cuda.Event()
            copied.record()
        return cls(output, host, copied)

    def result(self) -> StepOutput:
        """The step's output as plain lists; waits for the copy if it is still in flight."""
        if self.copied is not None:
            self.copied.synchronize()
        if self.sampled is not None:
            sampled, self.sampled = self.sampled, None
            self.output.token_ids = sampled.token_ids.tolist()
            for name in ("logprobs", "ranks", "top_token_ids", "top_logprobs"):
                value = getattr(sampled, name)
                setattr(self.output, name, None if value is None else value.tolist())
        return self.output
