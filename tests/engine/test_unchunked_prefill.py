"""With chunked prefill off, every prompt is read in one step, and greedy output still matches transformers."""
from __future__ import annotations

import random

import pytest

from autoglm import LLM, SamplingParams
from autoglm.engine.sched.batch import ScheduledBatch
from tests.engine.reference import greedy_reference
from tests.tiny_models import make_tiny_checkpoint

NUM_NEW_TOKENS = 24
MAX_CONTEXT_LEN = 128  # also the step's token budget: no two of the longer prompts fit in one step
PROMPT_LENGTHS = (90, 3, 60, 17, 70, 33, 100, 9)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_checkpoint("llama", tmp_path_factory.mktemp("llama"))


def make_prompts() -> list[list[int]]:
    """Random prompts, every other one opening with the same 40 tokens so the prefix cache is used too."""
    rng = random.Random(2)
    shared = [rng.randrange(3, 300) for _ in range(40)]
    prompts = []
    for i, length in enumerate(PROMPT_LENGTHS):
        start = shared[:length] if i % 2 else []
        prompts.append(start + [rng.randrange(3, 300) for _ in range(length - len(start))])
    return prompts


def test_whole_prompts_per_step_and_greedy_parity(model_dir, monkeypatch):
    prompts = make_prompts()
    reference = greedy_reference(model_dir, prompts, NUM_NEW_TOKENS)
    llm = LLM(model=str(model_dir), dtype="float32", enable_chunked_prefill=False, max_context_len=MAX_CONTEXT_LEN,
              max_num_batched_tokens=MAX_CONTEXT_LEN)
    scheduler = llm.engine.scheduler
    schedule = scheduler.schedule
    steps_reading_prompts: list[list[tuple[int, int]]] = []  # per step: (tokens scheduled, tokens left) per prompt

    def recording_schedule() -> ScheduledBatch:
        batch = schedule()
        prefills = [(num_new, seq.num_tokens - seq.num_computed_tokens)
                    for seq, num_new in zip(batch.seqs, batch.num_new_tokens, strict=True)
                    if seq.num_computed_tokens < seq.num_prompt_tokens]
        if prefills:
            steps_reading_prompts.append(prefills)
        return batch

    monkeypatch.setattr(scheduler, "schedule", recording_schedule)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True)
    outputs = llm.generate(prompts, params, use_tqdm=False)

    for i, output in enumerate(outputs):
        assert output.outputs[0].token_ids == reference.token_ids[i], f"prompt {i}: tokens differ from transformers"
    for prefills in steps_reading_prompts:
        assert all(num_new == left for num_new, left in prefills), f"a prompt was split across steps: {prefills}"
    assert len(steps_reading_prompts) > 1, "the prompts should not all fit in one step's budget"
    assert sum(output.num_cached_tokens for output in outputs) > 0, "some prompts should reuse the shared prefix"
    assert llm.engine.block_manager.num_referenced_blocks() == 0
