"""An engine whose model is replaced by a rule, to test scheduling fast and exactly.

The runner receives the real step plan (whose building checks that every computed token has a
KV slot) and answers its sampled rows and scored prompt positions, but its tokens and
log-probabilities come from formulas the tests can check.
"""
from __future__ import annotations

import bisect
from functools import lru_cache
from pathlib import Path

import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.sched.scheduler import Scheduler
from autoglm.engine.sequence import Sequence
from autoglm.engine.setup import EngineParts, collect_eos_token_ids
from autoglm.model_paths import DEFAULT_MODEL_DIR
from autoglm.models import ModelConfig
from autoglm.runner.pending_output import PendingStepOutput
from autoglm.step_output import ScoredPrompt, StepOutput
from autoglm.step_plan import StepPlan

FIRST_TOKEN_ID = 10  # generated ids stay clear of the special tokens, so nothing stops early


def prompt_logprob(position: int) -> float:
    """What the scripted runner reports for the prompt token at ``position``."""
    return -float(position)


class ScriptedRunner:
    """Stands in for :class:`ModelRunner`: next token = a function of the sequence so far."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.num_steps = 0
        self.scheduler: Scheduler | None = None  # the engine's, whose running sequences the plan's rows are
        self.last_seqs: list[Sequence] = []  # what the latest step computed

    def launch(self, plan: StepPlan) -> PendingStepOutput:
        return PendingStepOutput(self.execute(plan))

    def execute(self, plan: StepPlan) -> StepOutput:
        self.num_steps += 1
        by_id = {seq.seq_id: seq for seq in self.scheduler.running}
        self.last_seqs = [by_id[row_id] for row_id in plan.row_ids]
        output = StepOutput()
        for scoring in plan.prompt_scoring:
            count = len(scoring.target_token_ids)
            first = int(plan.positions[scoring.first_token])
            output.prompt_logprobs.append(ScoredPrompt(
                [prompt_logprob(first + 1 + i) for i in range(count)], [1] * count, [[]] * count, [[]] * count))
        starts = plan.cu_seqlens_q()
        for token in plan.sample_tokens:
            seq = self.last_seqs[bisect.bisect_right(starts, token) - 1]
            output.token_ids.append(self.next_token_at(seq, int(plan.positions[token])))
        return output

    def next_token_at(self, seq: Sequence, position: int) -> int:
        """The token after ``position`` of ``seq`` (a proposed token's position when verifying proposals)."""
        return self.next_token(seq.token_ids[:position + 1], seq.index)

    def next_token(self, token_ids: list[int], index: int) -> int:
        """Deterministic, different for each of a request's completions."""
        span = self.vocab_size - FIRST_TOKEN_ID
        return FIRST_TOKEN_ID + (sum(token_ids) * 31 + len(token_ids) * 7 + index * 101) % span


class TranscriptRunner(ScriptedRunner):
    """Writes ``scripts[i]`` (token ids, then EOS) as completion i's output, token by token by position."""

    def __init__(self, vocab_size: int, eos_token_id: int) -> None:
        super().__init__(vocab_size)
        self.eos_token_id = eos_token_id
        self.scripts: list[list[int]] = []

    def next_token_at(self, seq: Sequence, position: int) -> int:
        script = self.scripts[seq.index % len(self.scripts)]
        written = position + 1 - seq.num_prompt_tokens
        return script[written] if written < len(script) else self.eos_token_id


@lru_cache(maxsize=4)
def _model_files(folder: Path) -> tuple[ModelConfig, PreTrainedTokenizerBase]:
    return ModelConfig.from_pretrained(folder), AutoTokenizer.from_pretrained(str(folder))


def scripted_engine(num_blocks: int, runner: ScriptedRunner | None = None, model: Path | None = None,
                    **settings) -> LLMEngine:
    """An :class:`LLMEngine` with ``num_blocks`` KV blocks and a scripted runner (``runner``, or the default
    rule), over the config and tokenizer of the checkpoint folder ``model`` (default: the embedded model)."""
    config = AutoGLMConfig(dtype="float32", device="cpu", **settings)
    folder = model or DEFAULT_MODEL_DIR
    model_config, tokenizer = _model_files(folder)
    parts = EngineParts(
        model_path=folder, model_config=model_config, tokenizer=tokenizer, device=torch.device("cpu"),
        dtype=torch.float32, max_context_len=config.max_context_len,
        eos_token_ids=collect_eos_token_ids(folder, model_config, tokenizer), num_blocks=num_blocks,
        runner=runner or ScriptedRunner(model_config.vocab_size),
    )
    engine = LLMEngine(config.engine_config(), parts)
    engine.runner.scheduler = engine.scheduler
    return engine
