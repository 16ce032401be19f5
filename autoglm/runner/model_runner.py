"""One engine step on the device: inputs -> forward -> logits of the rows that matter -> sampling."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from autoglm.engine.sequence import Sequence
from autoglm.models.linear import Linear
from autoglm.profiling import ATTENTION, FORWARD, LINEAR, NO_PROFILER, PREPARE, SAMPLE, NullProfiler, StepProfiler
from autoglm.runner.attention import Attention, attention_metadata
from autoglm.runner.kv_cache import allocate_kv_cache
from autoglm.runner.sampler import Sampler, SamplingBatch
from autoglm.runner.step_inputs import StepInputs, build_step_inputs


@dataclass
class TokenLogprobs:
    """A token's raw-model log-probability, its rank, and the top-N alternatives."""

    token_id: int
    logprob: float | None  # None when the request asked for no logprobs
    rank: int | None = None
    top: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class StepResult:
    """What one forward pass produced, per sequence."""

    sampled: dict[Sequence, TokenLogprobs] = field(default_factory=dict)
    # For sequences asking for prompt logprobs: entries for the prompt tokens this chunk scored.
    prompt_logprobs: dict[Sequence, list[TokenLogprobs]] = field(default_factory=dict)


@dataclass
class LogitRows:
    """Which rows of a step's hidden states need logits, and what each is for."""

    rows: list[int] = field(default_factory=list)
    sampling_seqs: list[Sequence] = field(default_factory=list)  # sequences that get a new token
    sample_rows: list[int] = field(default_factory=list)  # index into ``rows`` of each one's last row
    # Sequences scoring their prompt: (seq, first position, chunk length, first index into ``rows``).
    scoring: list[tuple[Sequence, int, int, int]] = field(default_factory=list)

    @classmethod
    def of(cls, inputs: StepInputs) -> "LogitRows":
        wanted = cls()
        for seq, start, query_len in zip(inputs.seqs, inputs.query_starts, inputs.query_lens):
            first_position = seq.num_computed_tokens
            if seq.needs_prompt_logprobs and first_position < seq.num_prompt_tokens - 1:
                wanted.scoring.append((seq, first_position, query_len, len(wanted.rows)))
                wanted.rows.extend(range(start, start + query_len))
            if first_position + query_len == seq.num_tokens:
                if not wanted.scoring or wanted.scoring[-1][0] is not seq:
                    wanted.rows.append(start + query_len - 1)
                wanted.sampling_seqs.append(seq)
                wanted.sample_rows.append(len(wanted.rows) - 1)
        return wanted


class ModelRunner:
    """Owns the model, its KV pool and the sampler on one device."""

    def __init__(self, model: nn.Module, device: torch.device, dtype: torch.dtype, block_size: int,
                 num_blocks: int, vocab_size: int, eos_token_ids: set[int]) -> None:
        self.model = model
        self.device = device
        self.block_size = block_size
        self.vocab_size = vocab_size
        self.eos_token_ids = eos_token_ids
        self.kv_cache = allocate_kv_cache(model, num_blocks, block_size, dtype, device)
        self.sampler = Sampler()
        self.profiler: NullProfiler | StepProfiler = NO_PROFILER

    def enable_profiling(self, profiler: StepProfiler) -> None:
        """Time this runner's phases, and attention and linear layers inside the forward."""
        profiler.attach(self.model, {Attention: ATTENTION, Linear: LINEAR})
        self.profiler = profiler

    @torch.inference_mode()
    def execute(self, seqs: list[Sequence], num_new_tokens: list[int]) -> StepResult:
        profiler = self.profiler
        with profiler.phase(PREPARE):
            inputs = build_step_inputs(seqs, num_new_tokens, self.block_size, self.device)
            wanted = LogitRows.of(inputs)
        with profiler.phase(FORWARD), attention_metadata(inputs.attention):
            hidden = self.model(inputs.input_ids, inputs.positions)
        result = StepResult()
        if not wanted.rows:
            return result
        with profiler.phase(FORWARD), profiler.forward_part(LINEAR):
            logits = self.model.compute_logits(hidden[wanted.rows])
        with profiler.phase(SAMPLE):
            if wanted.scoring:
                self._score_prompts(logits, wanted.scoring, result)
            if wanted.sampling_seqs:
                self._sample(logits[wanted.sample_rows], wanted.sampling_seqs, result)
        return result

    def _sample(self, logits: torch.Tensor, seqs: list[Sequence], result: StepResult) -> None:
        batch = SamplingBatch.build(
            params=[seq.params for seq in seqs],
            prompt_token_ids=[seq.prompt_token_ids for seq in seqs],
            output_token_ids=[seq.output_token_ids for seq in seqs],
            generators=[seq.generator for seq in seqs],
            eos_token_ids=self.eos_token_ids,
            vocab_size=self.vocab_size,
            device=self.device,
        )
        out = self.sampler(logits, batch)
        token_ids = out.token_ids.tolist()
        logprobs = out.logprobs.tolist() if out.logprobs is not None else [None] * len(seqs)
        wants_top = [i for i, seq in enumerate(seqs) if seq.params.logprobs is not None]
        ranks: dict[int, int] = {}
        if wants_top:
            raw = torch.log_softmax(logits[wants_top].float(), dim=-1)
            chosen = raw.gather(1, out.token_ids[wants_top].unsqueeze(1))  # same tensor: ties compare exactly
            ranks = dict(zip(wants_top, ((raw > chosen).sum(dim=-1) + 1).tolist()))
        top_ids = out.top_token_ids.tolist() if out.top_token_ids is not None else None
        top_values = out.top_logprobs.tolist() if out.top_logprobs is not None else None
        for i, seq in enumerate(seqs):
            entry = TokenLogprobs(token_ids[i], logprobs[i], ranks.get(i))
            if top_ids is not None and seq.params.logprobs:
                count = seq.params.logprobs
                entry.top = list(zip(top_ids[i][:count], top_values[i][:count]))
            result.sampled[seq] = entry

    def _score_prompts(self, logits: torch.Tensor, scoring: list[tuple[Sequence, int, int, int]],
                       result: StepResult) -> None:
        """Log-probability of each next prompt token given the tokens before it."""
        for seq, first_position, query_len, first_row in scoring:
            last_position = min(first_position + query_len, seq.num_prompt_tokens - 1)
            positions = range(first_position, last_position)
            raw = torch.log_softmax(logits[first_row : first_row + len(positions)].float(), dim=-1)
            targets = torch.tensor(seq.token_ids[first_position + 1 : last_position + 1], device=raw.device)
            target_logprobs = raw.gather(1, targets.unsqueeze(1))
            ranks = ((raw > target_logprobs).sum(dim=-1) + 1).tolist()
            count = seq.params.prompt_logprobs
            top_values, top_ids = raw.topk(count, dim=-1) if count else (None, None)
            entries = []
            for j, (token_id, logprob) in enumerate(zip(targets.tolist(), target_logprobs.squeeze(1).tolist())):
                entry = TokenLogprobs(token_id, logprob, ranks[j])
                if count:
                    entry.top = list(zip(top_ids[j].tolist(), top_values[j].tolist()))
                entries.append(entry)
            result.prompt_logprobs[seq] = entries
