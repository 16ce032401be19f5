"""Decode steps on the persistent, padded buffers (graphs off, as on a CPU) give today's tokens and log-probs."""
from __future__ import annotations

import pytest
import torch

from autoglm import LLM, SamplingParams
from autoglm.engine import setup
from autoglm.runner.padded_decode import PaddedDecode, PaddedDecodeSettings, decode_batch_sizes, decode_graph_settings
from tests.engine.reference import parity_prompts
from tests.tiny_models import TINY_ARCHITECTURES, make_tiny_checkpoint

LOGPROB_TOLERANCE = 1e-4  # a padded batch may sum in another order
BATCH_SIZES = [1, 2, 4]  # eight prompts: steps of 5 to 8 rows run eagerly, 1 to 4 pad up to 1, 2 or 4


def test_the_ladder_pads_small_batches_to_powers_of_two_then_multiples_of_eight():
    assert decode_batch_sizes(64) == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]
    assert decode_batch_sizes(20) == [1, 2, 4, 8, 16, 20]
    assert decode_batch_sizes(3) == [1, 2, 3]
    assert decode_batch_sizes(1) == [1]


@pytest.mark.parametrize("device, enforce_eager, captured", [("cuda", False, True), ("cuda", True, False),
                                                              ("cpu", False, False)])
def test_graphs_are_captured_only_on_cuda_and_not_when_eager_is_enforced(device, enforce_eager, captured):
    settings = decode_graph_settings(torch.device(device), enforce_eager, max_num_seqs=16, max_context_len=100,
                                     block_size=16)
    assert (settings is not None) == captured
    if settings:
        assert settings == PaddedDecodeSettings([1, 2, 4, 8, 16], max_blocks_per_seq=7, capture_graphs=True)


def generate(model_dir, **settings):
    """Eight prompts whose outputs end at different steps, so decode batches shrink from 8 rows to 1;
    twice, so the second run decodes after cached prefixes."""
    llm = LLM(model=str(model_dir), dtype="float32", **settings)
    params = [SamplingParams(temperature=0.0, max_tokens=4 + 3 * i, ignore_eos=True, logprobs=0) for i in range(8)]
    runs = [llm.generate(parity_prompts(), params, use_tqdm=False) for _ in range(2)]
    return llm, [output.outputs[0] for outputs in runs for output in outputs]


def pad_decode_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engines built from now on serve decode steps from padded buffers, graphs off."""
    monkeypatch.setattr(setup, "decode_graph_settings", lambda device, enforce_eager, max_num_seqs, max_context_len,
                        block_size: PaddedDecodeSettings(BATCH_SIZES, -(-max_context_len // block_size), False))


@pytest.mark.parametrize("architecture", TINY_ARCHITECTURES)
def test_padded_decode_matches_the_eager_path(monkeypatch, tmp_path, architecture):
    model_dir = make_tiny_checkpoint(architecture, tmp_path)
    _, expected = generate(model_dir)

    padded_batches = []
    prepare = PaddedDecode.prepare

    def recording_prepare(self, plan):
        prepared = prepare(self, plan)
        padded_batches.append((len(plan.query_lens), int(prepared[0].shape[0])))
        return prepared

    monkeypatch.setattr(PaddedDecode, "prepare", recording_prepare)
    pad_decode_steps(monkeypatch)
    llm, got = generate(model_dir)

    assert {(3, 4), (1, 1)} <= set(padded_batches)  # padded rows ran, and unpadded ones
    assert llm.engine.runner.kv_pool.num_blocks == llm.engine.block_manager.num_blocks + 1  # the scratch block
    for i, (completion, reference) in enumerate(zip(got, expected)):
        assert completion.token_ids == reference.token_ids, f"output {i}: tokens differ from the eager path"
        for a, b in zip(completion.logprobs, reference.logprobs):
            assert abs(next(iter(a.values())).logprob - next(iter(b.values())).logprob) < LOGPROB_TOLERANCE


def test_padded_decode_under_async_scheduling_takes_its_deferred_tokens_from_the_step_before(monkeypatch, tmp_path):
    """On CUDA both are on by default: each decode step's inputs are the previous step's samples, filled into
    the persistent buffers on the device."""
    model_dir = make_tiny_checkpoint("qwen2", tmp_path)
    _, expected = generate(model_dir)
    pad_decode_steps(monkeypatch)
    deferred = []
    prepare = PaddedDecode.prepare

    def recording_prepare(self, plan):
        deferred.append(len(plan.deferred_positions))
        return prepare(self, plan)

    monkeypatch.setattr(PaddedDecode, "prepare", recording_prepare)
    _, got = generate(model_dir, async_scheduling=True)
    assert any(deferred), "no padded step took its inputs from the step before"
    assert [completion.token_ids for completion in got] == [reference.token_ids for reference in expected]
