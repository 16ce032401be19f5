"""The pipeline stage this process is, and how its activations reach the next stage.

One stage per process, set once by the distributed runtime before the model is built. Unset, this
process is the only stage: it holds every layer, embeds its own tokens and samples its own logits,
and nothing is sent. A stage hands the next one the residual stream as it stands after its last
layer (the two parts the decoder carries, ``hidden`` and ``residual``), point to point: sends never
wait, so a stage can start its next batch while the next stage reads the last one.
Imports only torch, so the models, the runner and the engine can all use it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from autoglm.distributed.stage_split import split_layers

# Activations travel under their own tag, apart from the plans on the same pairs of ranks.
ACTIVATIONS_TAG = 2


@dataclass(frozen=True)
class PipelineStage:
    index: int
    num_stages: int
    previous_rank: int | None  # the rank this stage reads its input stream from; None for the first stage
    next_rank: int | None  # the rank it sends its output stream to; None for the last stage

    @property
    def is_first(self) -> bool:
        return self.index == 0

    @property
    def is_last(self) -> bool:
        return self.index == self.num_stages - 1


_stage: PipelineStage | None = None
_sends: list[tuple[dist.Work, torch.Tensor]] = []  # sends under way, with the tensor each must keep alive


def init_pipeline_stage(index: int, num_stages: int, previous_rank: int | None, next_rank: int | None) -> None:
    """Make this process stage ``index`` of ``num_stages``; the ranks are its neighbours' in the default group."""
    global _stage
    if not 0 <= index < num_stages:
        raise ValueError(f"pipeline stage {index} of {num_stages}: need 0 <= stage < num_stages")
    if (previous_rank is None) != (index == 0) or (next_rank is None) != (index == num_stages - 1):
        raise ValueError(f"pipeline stage {index} of {num_stages} needs a previous rank unless first and a next "
                         f"rank unless last, got {previous_rank} and {next_rank}")
    _stage = PipelineStage(index, num_stages, previous_rank, next_rank)


def destroy_pipeline_stage() -> None:
    """Back to a single stage. Sends still under way are dropped, not waited for: the engine stops a stage only
    once it reads no more of its batches."""
    global _stage
    _sends.clear()
    _stage = None


def pipeline_stage() -> PipelineStage:
    """This process's stage; stage 0 of 1 when not initialised."""
    return _stage or PipelineStage(0, 1, None, None)


def stage_layers(num_layers: int) -> range:
    """The decoder layers this stage holds, of a model of ``num_layers``."""
    stage = pipeline_stage()
    return split_layers(num_layers, stage.num_stages)[stage.index]


def send_activations(hidden: torch.Tensor, residual: torch.Tensor) -> None:
    """Start sending the stream to the next stage; returns at once."""
    stage = pipeline_stage()
    assert stage.next_rank is not None, "the last stage sends nothing"
    _sends[:] = [(work, tensor) for work, tensor in _sends if not work.is_completed()]
    stream = torch.stack((hidden, residual))
    _sends.append((dist.isend(stream, dst=stage.next_rank, tag=ACTIVATIONS_TAG), stream))


def receive_activations(num_tokens: int, hidden_size: int, dtype: torch.dtype,
                        device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The stream ``(hidden, residual)`` of ``num_tokens`` tokens from the previous stage; waits for it."""
    stage = pipeline_stage()
    assert stage.previous_rank is not None, "the first stage embeds its tokens"
    stream = torch.empty(2, num_tokens, hidden_size, dtype=dtype, device=device)
    dist.recv(stream, src=stage.previous_rank, tag=ACTIVATIONS_TAG)
    return stream[0], stream[1]


def busiest_stage_bytes(own_bytes: int, num_layers: int) -> int:
    """``own_bytes`` of this stage's layers scaled to the stage that holds the most (every layer's alike): what one
    KV block costs the stage whose memory bounds the pool that every stage shares out alike."""
    stage = pipeline_stage()
    split = split_layers(num_layers, stage.num_stages)
    return own_bytes * max(map(len, split)) // len(split[stage.index])
