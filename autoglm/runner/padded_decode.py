"""Pure-decode steps on persistent buffers, padded to a ladder of batch sizes, replayed from CUDA graphs.

A decode step's forward is hundreds of small kernels; launched one by one from Python they cost
more than the work on a fast GPU. Captured once per batch size at start and replayed, a step
costs one launch. Steps are padded up to the next captured size (1, 2, 4, then every multiple of
8 up to ``max_num_seqs``, as vLLM pads), and steps with a prompt chunk, scored prompt tokens or
more rows than the largest size run eagerly as before, and so do steps with three-axis rotary positions (a
vision-language prompt's rows), which the buffers do not hold.
"""
from __future__ import annotations

import bisect
import logging
import time
from dataclasses import dataclass

import torch
from torch import nn

from autoglm.attention import AttentionMetadata, ForwardContext
from autoglm.runner.decode_buffers import DecodeBuffers
from autoglm.step_plan import StepPlan

logger = logging.getLogger(__name__)

LADDER_STEP = 8  # batch sizes past 4 are multiples of this


def decode_batch_sizes(max_num_seqs: int) -> list[int]:
    """The sizes decode steps are padded to: 1, 2, 4, then multiples of 8, and ``max_num_seqs`` itself."""
    sizes = {size for size in (1, 2, 4) if size < max_num_seqs}
    sizes.update(range(LADDER_STEP, max_num_seqs, LADDER_STEP))
    sizes.add(max_num_seqs)
    return sorted(sizes)


@dataclass(frozen=True)
class PaddedDecodeSettings:
    batch_sizes: list[int]  # ascending
    max_blocks_per_seq: int
    capture_graphs: bool  # False: the same padded buffers, run eagerly


def decode_graph_settings(device: torch.device, enforce_eager: bool, max_num_seqs: int, max_context_len: int,
                          block_size: int) -> PaddedDecodeSettings | None:
    """Graphs for decode steps on CUDA unless ``enforce_eager``; elsewhere none (a CPU gains nothing from padding)."""
    if device.type != "cuda" or enforce_eager:
        return None
    return PaddedDecodeSettings(decode_batch_sizes(max_num_seqs), -(-max_context_len // block_size),
                                capture_graphs=True)


class PaddedDecode:
    """Serves pure-decode plans from :class:`DecodeBuffers`, by graph replay where a graph was captured."""

    def __init__(self, model: nn.Module, forward_context: ForwardContext, settings: PaddedDecodeSettings,
                 scratch_block: int, block_size: int, device: torch.device) -> None:
        self.model = model
        self.forward_context = forward_context
        self.batch_sizes = settings.batch_sizes
        self.buffers = DecodeBuffers.allocate(settings.batch_sizes[-1], settings.max_blocks_per_seq, block_size,
                                              scratch_block, device)
        self._graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        if settings.capture_graphs:
            self._capture(device)

    @property
    def captured_batch_sizes(self) -> list[int]:
        return sorted(self._graphs)

    def serves(self, plan: StepPlan) -> bool:
        rows = len(plan.query_lens)
        return (0 < rows <= self.batch_sizes[-1] and plan.num_decode_tokens == rows and not plan.prompt_scoring
                and plan.mrope_positions is None)

    def prepare(self, plan: StepPlan) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata]:
        """Fill the buffers from ``plan``: its padded token ids and positions, and the metadata viewing them."""
        rows = len(plan.query_lens)
        batch = self.batch_sizes[bisect.bisect_left(self.batch_sizes, rows)]
        self.buffers.fill(plan, batch)
        metadata = self.buffers.metadata(batch, list(plan.seq_lens) + [1] * (batch - rows))
        return self.buffers.input_ids[:batch], self.buffers.positions[:batch], metadata

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Hidden states of every padded row: the captured graph's output for this size, else an eager forward
        (under the caller's forward context)."""
        captured = self._graphs.get(int(input_ids.shape[0]))
        if captured is None:
            return self.model(input_ids, positions)
        graph, hidden = captured
        graph.replay()
        return hidden

    @torch.inference_mode()
    def _capture(self, device: torch.device) -> None:
        """One graph per batch size, largest first so the smaller ones reuse its memory pool."""
        torch.cuda.synchronize(device)
        free_before = torch.cuda.mem_get_info(device)[0]
        started = time.perf_counter()
        pool = torch.cuda.graph_pool_handle()
        for batch in reversed(self.batch_sizes):
            self.buffers.pad(0, batch)
            input_ids, positions = self.buffers.input_ids[:batch], self.buffers.positions[:batch]
            with self.forward_context.step(self.buffers.metadata(batch, [1] * batch)):
                self.model(input_ids, positions)  # compiles kernels and sets up library workspaces outside capture
                torch.cuda.synchronize(device)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    hidden = self.model(input_ids, positions)
            self._graphs[batch] = graph, hidden
        torch.cuda.synchronize(device)
        logger.info("captured %d decode graphs (batch sizes %s) in %.1f s, using %.1f MiB", len(self._graphs),
                    ", ".join(map(str, self.batch_sizes)), time.perf_counter() - started,
                    (free_before - torch.cuda.mem_get_info(device)[0]) / 2**20)
