"""Speculative decoding changes no output: greedy and seeded sampled requests give, token for token, what
plain decoding gives, with either proposer, at any batch size, under preemption and prefix caching."""
from __future__ import annotations

import math
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from autoglm import LLM, SamplingParams
from autoglm.structured_outputs import StructuredOutputsParams
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.optional_packages import needs_xgrammar
from tests.tiny_models import make_tiny_checkpoint

MAX_TOKENS = 24
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A target, and a draft of the same vocabulary with other weights (it proposes badly)."""
    root = tmp_path_factory.mktemp("speculative")
    return make_tiny_checkpoint("llama", root / "target"), make_tiny_checkpoint("llama", root / "draft", seed=1)


def perturbed_copy(model_dir, path, scale: float):
    """The checkpoint with noise added to every weight: a draft that agrees with it often, not always."""
    shutil.copytree(model_dir, path)
    weights = load_file(path / "model.safetensors")
    generator = torch.Generator().manual_seed(2)
    save_file({name: tensor + scale * torch.randn(tensor.shape, generator=generator)
               for name, tensor in weights.items()}, path / "model.safetensors", metadata={"format": "pt"})
    return path


def draft(model_dir, k: int = 3) -> dict:
    return {"method": "draft_model", "num_speculative_tokens": k, "model": str(model_dir)}


@pytest.fixture(params=["ngram", "draft_model"])
def spec(request, models) -> dict:
    """Each proposer's speculative_config: n-gram lookup, or the badly proposing draft."""
    return NGRAM if request.param == "ngram" else draft(models[1])


def quoting_prompts(count: int) -> list[list[int]]:
    """Prompts that repeat themselves, so that n-gram lookup finds matches."""
    return [[3 + (i * 7 + j * 5) % 40 for j in range(6 + 3 * i)] * 3 for i in range(count)]


GREEDY = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True, logprobs=1)
SAMPLED = SamplingParams(temperature=0.9, top_p=0.95, max_tokens=MAX_TOKENS, ignore_eos=True, seed=11,
                         repetition_penalty=1.1, frequency_penalty=0.2, n=2)


def generate(model_dir, prompts, params, **settings):
    llm = LLM(model=str(model_dir), dtype="float32", **settings)
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return llm, [[(c.token_ids, c.finish_reason) for c in output.outputs] for output in outputs]


def logprob_values(llm, prompts, params) -> list[list[dict[int, float]]]:
    """Each completion's log-probs, every position's tokens and values, of one prompt after another."""
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return [[{token_id: entry.logprob for token_id, entry in position.items()} for position in c.logprobs]
            for output in outputs for c in output.outputs]


def assert_same_logprobs(got: list[list[dict[int, float]]], expected: list[list[dict[int, float]]]) -> None:
    """The same tokens at every position, their log-probs within 1e-4 (float32 computes a verified run
    in one pass where plain decoding takes one token a pass)."""
    assert [[sorted(position) for position in c] for c in got] == [[sorted(position) for position in c]
                                                                    for c in expected]
    for completion, reference in zip(got, expected):
        for position, reference_position in zip(completion, reference):
            for token_id, value in position.items():
                assert value == pytest.approx(reference_position[token_id], abs=1e-4)


def assert_whole(llm) -> None:
    manager = llm.engine.block_manager
    manager.check_invariants()
    assert manager.num_referenced_blocks() == 0 and manager.num_free_blocks == manager.num_blocks


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_greedy_output_is_unchanged(models, spec, batch_size):
    target, _ = models
    prompts = quoting_prompts(batch_size)
    _, plain = generate(target, prompts, GREEDY)
    llm, speculative = generate(target, prompts, GREEDY, speculative_config=spec)
    assert speculative == plain
    stats = llm.engine.get_stats().spec_decode
    assert stats.num_draft_tokens > 0
    assert_whole(llm)


def test_sampled_output_with_penalties_and_n_is_unchanged(models, spec):
    target, _ = models
    prompts = quoting_prompts(4)
    _, plain = generate(target, prompts, SAMPLED)
    llm, speculative = generate(target, prompts, SAMPLED, speculative_config=spec)
    assert speculative == plain
    assert llm.engine.get_stats().spec_decode.num_drafts > 0
    assert_whole(llm)


def test_a_draft_identical_to_the_target_is_always_accepted(models):
    """Also after preemptions and from cached prefixes: the draft's own K/V is never read stale."""
    target, _ = models
    probe = LLM(model=str(target), dtype="float32", kv_cache_memory=1 << 20)
    llm = LLM(model=str(target), dtype="float32", speculative_config=draft(target, k=3), block_size=4,
              kv_cache_memory=kv_bytes_for_blocks(probe, 8), max_num_batched_tokens=64)
    speculative = [logprob_values(llm, quoting_prompts(6), GREEDY) for _ in range(2)]
    assert llm.engine.scheduler.num_preemptions > 0 and llm.engine.block_manager.prefix_cache_hits > 0
    stats = llm.engine.get_stats().spec_decode
    assert stats.acceptance_rate == 1.0
    assert stats.accepted_per_position[0] == stats.num_drafts  # near max_tokens drafts are shorter
    plain = logprob_values(probe, quoting_prompts(6), GREEDY)
    for run in speculative:  # the log-probs of accepted runs are those plain decoding computes
        assert_same_logprobs(run, plain)


def test_preemption_under_a_tiny_kv_pool(models, spec):
    target, _ = models
    prompts = quoting_prompts(6)
    _, plain = generate(target, prompts, GREEDY)
    probe = LLM(model=str(target), dtype="float32", kv_cache_memory=1 << 20)
    llm, speculative = generate(target, prompts, GREEDY, speculative_config=spec, block_size=4,
                                kv_cache_memory=kv_bytes_for_blocks(probe, 8), max_num_batched_tokens=64)
    assert llm.engine.scheduler.num_preemptions > 0
    assert speculative == plain
    assert_whole(llm)


def test_prefix_cache_hits_keep_outputs(models):
    target, bad_draft = models
    prompts = quoting_prompts(4)
    _, plain = generate(target, prompts, GREEDY, block_size=4)
    llm = LLM(model=str(target), dtype="float32", block_size=4, speculative_config=draft(bad_draft))
    for _ in range(2):
        outputs = llm.generate(prompts, GREEDY, use_tqdm=False)
        assert [[(c.token_ids, c.finish_reason) for c in o.outputs] for o in outputs] == plain
    assert llm.engine.block_manager.prefix_cache_hits > 0
    assert_whole(llm)


def test_stops_inside_an_accepted_run_truncate_there(models):
    target, _ = models
    prompts = quoting_prompts(3)
    _, free_running = generate(target, prompts, GREEDY)
    stop_ids = [tokens[0][5] for tokens, in free_running]
    params = [SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, stop_token_ids=[stop]) for stop in stop_ids]
    _, plain = generate(target, prompts, params)
    llm, speculative = generate(target, prompts, params, speculative_config=draft(target, k=4))
    assert speculative == plain
    assert all(len(tokens) <= 6 and reason == "stop" for (tokens, reason), in speculative)
    assert llm.engine.get_stats().spec_decode.acceptance_rate == 1.0


@needs_xgrammar
def test_constrained_requests_decode_without_proposals(models):
    """A grammar must see each token before the next is chosen: such requests fall back to plain decoding."""
    target, bad_draft = models
    prompts = quoting_prompts(2)
    constrained = SamplingParams(temperature=0.0, max_tokens=8,
                                 structured_outputs=StructuredOutputsParams(regex="[a-z]+"))
    params = [constrained, GREEDY]
    _, plain = generate(target, prompts, params)
    llm = LLM(model=str(target), dtype="float32", speculative_config=draft(bad_draft))
    proposed_for: set[str] = set()
    propose = llm.engine.proposer.propose

    def recording(seqs, max_lengths):
        proposed_for.update(seq.request_id for seq in seqs)
        return propose(seqs, max_lengths)

    llm.engine.proposer.propose = recording
    outputs = llm.generate(prompts, params, use_tqdm=False)
    assert [[(c.token_ids, c.finish_reason) for c in o.outputs] for o in outputs] == plain
    assert proposed_for == {outputs[1].request_id}


def test_sampled_tokens_follow_the_targets_distribution(models):
    """Chi-square over 600 seeded draws of the first verified position, with a draft that is often wrong:
    the kept-or-resampled token must follow the target's top-4 distribution (3 degrees of freedom; the bound,
    16.27, is exceeded with probability 0.001 by a sampler that is right)."""
    target, _ = models
    near_draft = perturbed_copy(target, target.parent / "near", 0.05)
    prompt = quoting_prompts(1)[0]
    llm = LLM(model=str(target), dtype="float32", speculative_config=draft(near_draft, k=2))
    params = [SamplingParams(temperature=1.0, top_k=4, max_tokens=3, ignore_eos=True, seed=seed)
              for seed in range(600)]
    outputs = [output.outputs[0].token_ids for output in llm.generate([prompt] * 600, params, use_tqdm=False)]
    stats = llm.engine.get_stats().spec_decode
    assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens  # some proposals kept, some resampled
    first = max(set(tokens[0] for tokens in outputs), key=[tokens[0] for tokens in outputs].count)
    seconds = [tokens[1] for tokens in outputs if tokens[0] == first]
    (reference,) = LLM(model=str(target), dtype="float32").generate(
        [prompt + [first]], SamplingParams(temperature=0.0, max_tokens=1, logprobs=4), use_tqdm=False)
    top = reference.outputs[0].logprobs[0]
    weights = {token_id: math.exp(entry.logprob) for token_id, entry in top.items()}
    total = sum(weights.values())
    assert set(seconds) <= set(weights)
    chi_square = sum((seconds.count(token_id) - len(seconds) * weight / total) ** 2 / (len(seconds) * weight / total)
                     for token_id, weight in weights.items())
    assert chi_square < 16.27, (chi_square, len(seconds))
