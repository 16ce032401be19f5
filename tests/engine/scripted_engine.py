"""An engine whose model is replaced by a rule, to test scheduling fast and exactly.

The runner picks the rows to score and sample as the real one does (``LogitRows``) and
builds the real step inputs (which checks that every computed token has a KV slot), but
its tokens and log-probabilities come from formulas the tests can check.
"""
from __future__ import annotations

from functools import lru_cache

import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.sequence import Sequence
from autoglm.engine.setup import EngineParts, collect_eos_token_ids
from autoglm.model_paths import DEFAULT_MODEL_DIR
from autoglm.models import ModelConfig
from autoglm.runner.model_runner import LogitRows, StepResult, TokenLogprobs
from autoglm.runner.step_inputs import build_step_inputs

FIRST_TOKEN_ID = 10  # generated ids stay clear of the special tokens, so nothing stops early


def prompt_logprob(position: int) -> float:
    """What the scripted runner reports for the prompt token at ``position``."""
    return -float(position)


class ScriptedRunner:
    """Stands in for :class:`ModelRunner`: next token = a function of the sequence so far."""

    def __init__(self, block_size: int, vocab_size: int) -> None:
        self.block_size = block_size
        self.vocab_size = vocab_size
        self.num_steps = 0
        self.last_seqs: list[Sequence] = []  # what the latest step computed

    def execute(self, seqs: list[Sequence], num_new_tokens: list[int]) -> StepResult:
        self.num_steps += 1
        self.last_seqs = list(seqs)
        wanted = LogitRows.of(build_step_inputs(seqs, num_new_tokens, self.block_size, torch.device("cpu")))
        result = StepResult()
        for seq, first_position, query_len, _ in wanted.scoring:
            last_position = min(first_position + query_len, seq.num_prompt_tokens - 1)
            result.prompt_logprobs[seq] = [
                TokenLogprobs(seq.token_ids[position + 1], prompt_logprob(position + 1), 1)
                for position in range(first_position, last_position)
            ]
        for seq in wanted.sampling_seqs:
            result.sampled[seq] = TokenLogprobs(self.next_token(seq.token_ids, seq.index), None)
        return result

    def next_token(self, token_ids: list[int], index: int) -> int:
        """Deterministic, different for each of a request's completions."""
        span = self.vocab_size - FIRST_TOKEN_ID
        return FIRST_TOKEN_ID + (sum(token_ids) * 31 + len(token_ids) * 7 + index * 101) % span


@lru_cache(maxsize=1)
def _embedded_model_files() -> tuple[ModelConfig, PreTrainedTokenizerBase]:
    return ModelConfig.from_pretrained(DEFAULT_MODEL_DIR), AutoTokenizer.from_pretrained(str(DEFAULT_MODEL_DIR))


def scripted_engine(num_blocks: int, **settings) -> LLMEngine:
    """An :class:`LLMEngine` with the embedded model's tokenizer, ``num_blocks`` KV blocks and a scripted runner."""
    config = AutoGLMConfig(dtype="float32", device="cpu", **settings)
    model_config, tokenizer = _embedded_model_files()
    parts = EngineParts(
        model_path=DEFAULT_MODEL_DIR, model_config=model_config, tokenizer=tokenizer, device=torch.device("cpu"),
        dtype=torch.float32, max_context_len=config.max_context_len,
        eos_token_ids=collect_eos_token_ids(DEFAULT_MODEL_DIR, model_config, tokenizer), num_blocks=num_blocks,
        runner=ScriptedRunner(config.block_size, model_config.vocab_size),
    )
    return LLMEngine(config, parts)
