"""Multi-token prediction (MTP): the target checkpoint's own prediction layer proposes, run k times in a chain.

The layer reads, at position ``i``, the target's final hidden state there and token ``i + 1``, and predicts
token ``i + 2``. Each round first catches up on the positions the target computed since the last round (the
prompt, then each step's kept tokens), whose last one yields the first proposal; each further step of the chain
takes the previous step's output state and the token it proposed.

The layer's K/V pool has as many blocks as the target's and is addressed through the target's block tables, as a
draft model's is; slot ``i`` holds the layer's K/V of position ``i``. What the pool holds from the target's
hidden states stays; what a chain wrote past them is rewritten next round from the target's states. Where those
states are missing (positions served from the prefix cache, whose slots hold what an earlier sequence wrote),
the layer reads what the slots hold: proposals may be worse, outputs stay exact, since verification keeps
only what the target draws itself. Each proposal is sampled with the draw plain decoding of the target makes at
that position, as the draft model's are.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from autoglm.attention import ForwardContext
from autoglm.device_transfer import tensor_to_device
from autoglm.engine.plan_builder import build_step_plan, row_sampling
from autoglm.engine.sequence import Sequence
from autoglm.engine.speculative.target_hidden_states import TargetHiddenStates
from autoglm.models.decoder import DecoderForCausalLM
from autoglm.models.glm4_mtp import Glm4MtpLayer
from autoglm.runner.kv_cache import allocate_kv_cache, attention_layers
from autoglm.runner.model_runner import ModelRunner
from autoglm.runner.sampler import Sampler, SamplingBatch
from autoglm.step_plan import RowSampling


@dataclass
class _MtpKV:
    """How far the layer's pool holds a sequence's K/V computed from the target's own states."""

    num_positions: int
    num_preemptions: int  # a preemption gave the sequence other blocks: what the pool held is gone


class MtpProposer:
    """Proposes ``max_lengths[i]`` tokens of each sequence with the MTP layer, all sequences batched per step."""

    def __init__(self, layer: Glm4MtpLayer, target_runner: ModelRunner, dtype: torch.dtype, num_blocks: int,
                 block_size: int, eos_token_ids: set[int]) -> None:
        self.layer = layer
        self.target: DecoderForCausalLM = target_runner.model  # whose embedding, rotary and LM head the layer shares
        self.device = target_runner.device
        self.vocab_size = target_runner.vocab_size
        self.block_size = block_size
        self.eos_token_ids = eos_token_ids
        self.kv_pool = allocate_kv_cache(layer, num_blocks, block_size, dtype, self.device,
                                         target_runner.kv_pool.format)
        self.forward_context = ForwardContext(target_runner.attention_backend)
        for attention in attention_layers(layer):
            attention.forward_context = self.forward_context
        self.sampler = Sampler()
        self.hidden_states = TargetHiddenStates()
        target_runner.hidden_states_sink = self.hidden_states
        self._kv: dict[int, _MtpKV] = {}  # by seq_id, for the sequences proposed for last time

    @torch.inference_mode()
    def propose(self, seqs: list[Sequence], max_lengths: list[int]) -> list[list[int]]:
        proposals: list[list[int]] = [[] for _ in seqs]
        shadows: dict[int, Sequence] = {}
        previous: dict[int, torch.Tensor] = {}  # by index into seqs: the states the next step reads
        for i, (seq, length) in enumerate(zip(seqs, max_lengths)):
            caught_up = self._catch_up_inputs(seq) if length > 0 else None
            if caught_up is not None:
                shadows[i], previous[i] = caught_up
        kept = {seq.seq_id: _MtpKV(seq.num_computed_tokens, seq.num_preemptions)
                for i, seq in enumerate(seqs) if i in shadows}
        while shadows:
            active = list(shadows)
            outputs = self._step([shadows[i] for i in active], [previous[i] for i in active])
            sampling = [replace(row_sampling(seqs[i], self.eos_token_ids, proposals[i]), num_logprobs=None)
                        for i in active]
            drawn = self._sample(self.target.compute_logits(outputs), sampling)
            for i, output, token_id in zip(active, outputs, drawn):
                proposals[i].append(token_id)
                shadow = shadows[i]
                shadow.num_computed_tokens = shadow.num_tokens
                shadow.token_ids.append(token_id)
                previous[i] = output.unsqueeze(0)
                if len(proposals[i]) == max_lengths[i]:
                    del shadows[i]
        for seq in seqs:
            if seq.seq_id in kept:
                self.hidden_states.drop_before(seq.seq_id, seq.num_computed_tokens - 1)
        self._kv = kept
        return proposals

    def _catch_up_inputs(self, seq: Sequence) -> tuple[Sequence, torch.Tensor] | None:
        """The layer's view of ``seq`` for its first step: its tokens shifted by one (row ``i`` reads token
        ``i + 1``), the positions already held counted as computed; and the target's states of the positions
        still to compute. None where the target's states of the latest positions are missing."""
        last = seq.num_computed_tokens - 1  # its state and the token after it give the first proposal
        run = self.hidden_states.runs.get(seq.seq_id)
        if last < 0 or seq.num_tokens != seq.num_computed_tokens + 1 or run is None or not run.first <= last < run.end:
            return None
        held = self._kv.get(seq.seq_id)
        first = held.num_positions if held is not None and held.num_preemptions == seq.num_preemptions else 0
        first = min(max(first, run.first), last)
        shadow = Sequence(request_id=seq.request_id, index=seq.index, token_ids=seq.token_ids[1:],
                          num_prompt_tokens=seq.num_prompt_tokens - 1, params=seq.params, max_tokens=seq.max_tokens,
                          arrival_time=seq.arrival_time, block_table=seq.block_table, seed=seq.seed)
        shadow.needs_prompt_logprobs = False
        shadow.num_computed_tokens = first
        return shadow, run.since(first)[: last + 1 - first]

    def _step(self, shadows: list[Sequence], previous: list[torch.Tensor]) -> torch.Tensor:
        """One step of the layer over each shadow's uncomputed rows; the output state of each one's last row."""
        planned = build_step_plan(shadows, [shadow.num_tokens - shadow.num_computed_tokens for shadow in shadows],
                                  self.block_size, self.eos_token_ids)
        plan = planned.plan
        index = {id(shadow): i for i, shadow in enumerate(shadows)}
        plan_rows = [index[id(shadow)] for shadow in planned.seqs]
        states = torch.cat([previous[i] for i in plan_rows])
        input_ids = tensor_to_device(plan.input_ids, self.device)
        positions = tensor_to_device(plan.positions, self.device)
        embeddings = self.target.model.embed_tokens(input_ids)
        # Row i pairs the state of position i with the token of position i + 1, rotated as the latter.
        angles = self.target.model.rotary_emb(positions + 1, embeddings.dtype)
        metadata = self.forward_context.backend.build_metadata(plan, self.device)
        with self.forward_context.step(metadata):
            hidden = self.layer(embeddings, states, angles)
        ends = plan.cu_seqlens_q()[1:]
        last_rows = [0] * len(shadows)  # in the callers' order
        for row, i in enumerate(plan_rows):
            last_rows[i] = ends[row] - 1
        return hidden[torch.tensor(last_rows, device=self.device)]

    def _sample(self, logits: torch.Tensor, sampling: list[RowSampling]) -> list[int]:
        batch = SamplingBatch.build(sampling, self.vocab_size, self.device)
        return self.sampler(logits, batch).token_ids.tolist()
