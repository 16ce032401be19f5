"""Two pipeline stages on gloo give transformers' greedy tokens, log-probs within 1e-5, for every dense
architecture, with prompts read in chunks, prefix-cache hits and preemption in the mix, and two batches
in the pipe at once; and so do two stages of two tensor-parallel ranks each."""
from __future__ import annotations

import pytest

from autoglm import LLM, SamplingParams
from tests.engine.reference import greedy_reference, parity_prompts
from tests.engine.tensor_parallel.test_engine_lifecycle import gone
from tests.tiny_models import TINY_ARCHITECTURES, TINY_SHAPE, make_tiny_checkpoint

STAGES = 2
NUM_LAYERS = 4  # two a stage
BLOCK_SIZE = 16
POOL_BLOCKS = 12  # fewer than the eight prompts need at once: some are preempted
LOGPROB_TOLERANCE = 1e-5
NUM_NEW_TOKENS = 16  # with the longest prompts, past the pool: some sequences are preempted
TENSOR_PARALLEL_TOLERANCE = 1e-4
HEAD_DIM = 16


def stage_kv_bytes(num_blocks: int) -> int:
    """The kv_cache_memory that gives a stage of two float32 layers ``num_blocks`` blocks."""
    per_layer = 2 * BLOCK_SIZE * TINY_SHAPE["num_key_value_heads"] * HEAD_DIM * 4
    return num_blocks * per_layer * NUM_LAYERS // STAGES


def assert_matches(outputs, reference, tolerance: float = LOGPROB_TOLERANCE) -> None:
    for i, output in enumerate(outputs):
        completion = output.outputs[0]
        assert completion.token_ids == reference.token_ids[i], f"prompt {i}: tokens differ from transformers"
        got = [next(iter(position.values())).logprob for position in completion.logprobs]
        assert got == pytest.approx(reference.logprobs[i], abs=tolerance), f"prompt {i}: log-probs"


def record_depth(llm: LLM) -> list[int]:
    """How many steps were in flight after each launch."""
    microbatches, depths = llm.engine._microbatches, []
    push = microbatches.push

    def recording_push(step):
        push(step)
        depths.append(len(microbatches))

    microbatches.push = recording_push
    return depths


@pytest.mark.timeout(300)
@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
def test_two_stages_match_transformers_through_chunks_prefix_hits_and_preemption(arch, tmp_path, restored_threads):
    model_dir = make_tiny_checkpoint(arch, tmp_path / arch, num_hidden_layers=NUM_LAYERS)
    prompts = parity_prompts()
    reference = greedy_reference(model_dir, prompts, NUM_NEW_TOKENS)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    with LLM(model=str(model_dir), dtype="float32", pipeline_parallel_size=STAGES, max_num_batched_tokens=16,
             block_size=BLOCK_SIZE, kv_cache_memory=stage_kv_bytes(POOL_BLOCKS)) as llm:
        assert llm.engine.block_manager.num_blocks == POOL_BLOCKS
        assert llm.engine.runner.kv_pool.values.shape[0] == NUM_LAYERS // STAGES  # the last stage's layers only
        depths = record_depth(llm)
        first = llm.generate(prompts, params, use_tqdm=False)
        assert llm.engine.scheduler.num_preemptions > 0
        second = llm.generate(prompts, params, use_tqdm=False)
        assert sum(output.num_cached_tokens for output in second) > 0
    assert max(depths) == STAGES
    assert_matches(first, reference)
    assert_matches(second, reference)


@pytest.mark.timeout(300)
def test_two_stages_of_two_tensor_parallel_ranks_match_transformers(tmp_path, restored_threads):
    """Four processes: each stage's heads split between its two ranks, whose partial sums add up in another order
    than one process's (the tensor-parallel tolerance). Closed with a step in the pipe, every stage still stops."""
    model_dir = make_tiny_checkpoint("llama", tmp_path / "llama", num_hidden_layers=NUM_LAYERS)
    prompts = parity_prompts()[:4]
    reference = greedy_reference(model_dir, prompts, NUM_NEW_TOKENS)
    params = SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)
    with LLM(model=str(model_dir), dtype="float32", pipeline_parallel_size=STAGES, tensor_parallel_size=2,
             max_num_batched_tokens=16, block_size=BLOCK_SIZE, kv_cache_memory=stage_kv_bytes(POOL_BLOCKS) // 2) as llm:
        assert llm.engine.block_manager.num_blocks == POOL_BLOCKS
        workers = llm.engine._workers.pids
        assert len(workers) == 3
        outputs = llm.generate(prompts, params, use_tqdm=False)
        for index, prompt in enumerate(prompts):  # closed below with a step still in the pipe
            llm.engine.add_request(f"left-{index}", prompt, params)
        llm.engine.step()
        assert len(llm.engine._microbatches) == 1
    assert all(gone(worker) for worker in workers)
    assert_matches(outputs, reference, TENSOR_PARALLEL_TOLERANCE)
