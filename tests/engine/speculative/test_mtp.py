"""GLM's multi-token prediction layer as a speculative method: its proposals are transformers' MTP forward on the
same inputs, and speculation with it changes no output, greedy or sampled; a model without the layer is refused
by name."""
from __future__ import annotations

import json
import math
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM
from transformers.cache_utils import MtpCache
from transformers.modeling_layers import MtpModel

from autoglm import LLM, SamplingParams
from autoglm.bench.make_model.checkpoint import make_model
from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.config.speculative import parse_speculative_config
from autoglm.sampling_params import MAX_N
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.engine.speculative.test_engine_parity import assert_same_logprobs, assert_whole
from tests.tiny_models import WEIGHT_STD, make_tiny_checkpoint

MTP_INDEX = 3  # glm4.5-air-tiny has 3 decoder layers: its MTP layer is model.layers.3
MTP_SHARD = "model-00002-of-00002.safetensors"
DRAWS = 2000


def mtp(k: int) -> dict:
    return {"method": "mtp", "num_speculative_tokens": k}


def rewrite_weights(folder, change) -> None:
    """Every shard of ``folder`` with ``change(name, tensor)`` in place of each tensor."""
    for shard in sorted(folder.glob("*.safetensors")):
        tensors = load_file(shard)
        save_file({name: change(name, tensor) for name, tensor in tensors.items()}, shard, metadata={"format": "pt"})


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """``glm4.5-air-tiny`` in float32 with its weights spread wider, so that greedy choices are not near-ties."""
    path = make_model("glm4.5-air-tiny", tmp_path_factory.mktemp("mtp") / "model", dtype="float32")
    generator = torch.Generator().manual_seed(0)

    def widen(name, tensor):
        noise = torch.randn(tensor.shape, generator=generator)
        return 1.0 + 0.1 * noise if "norm" in name and name.endswith("weight") else WEIGHT_STD * noise

    rewrite_weights(path, widen)
    return path


@pytest.fixture(scope="module")
def copying_folder(folder):
    """The same target with an MTP layer that passes the target's state through unchanged (``eh_proj`` keeps the
    state's half, the decoder layer adds nothing): it proposes, k times, the token the target just chose, which
    the target keeps wherever it repeats a token."""
    path = folder.parent / "copying"
    shutil.copytree(folder, path)
    prefix = f"model.layers.{MTP_INDEX}."

    def copy_state(name, tensor):
        if not name.startswith(prefix):
            return tensor
        own = name.removeprefix(prefix)
        if own == "eh_proj.weight":
            hidden = tensor.shape[0]
            return torch.cat([torch.zeros(hidden, hidden), torch.eye(hidden)], dim=1)
        if own in ("hnorm.weight", "shared_head.norm.weight"):
            return torch.ones_like(tensor)
        if own == "self_attn.o_proj.weight" or own.endswith("down_proj.weight"):
            return torch.zeros_like(tensor)
        return tensor

    rewrite_weights(path, copy_state)
    return path


@pytest.fixture(scope="module")
def plain(folder):
    return LLM(model=str(folder), dtype="float32", block_size=4)


@pytest.fixture(scope="module")
def speculative(folder):
    return LLM(model=str(folder), dtype="float32", block_size=4, speculative_config=mtp(2))


def prompts(count: int) -> list[list[int]]:
    return [[3 + (i * 7 + j * 5) % 90 for j in range(5 + 4 * i)] for i in range(count)]


def completions(llm, prompt_list, params) -> list[list[tuple[list[int], str]]]:
    outputs = llm.generate(prompt_list, params, use_tqdm=False)
    return [[(c.token_ids, c.finish_reason) for c in output.outputs] for output in outputs]


def test_proposals_equal_transformers_mtp_forward(folder, speculative):
    """The first round after a prompt: the catch-up over the prompt, then a chain of two steps, each step's logits
    within 1e-4 of transformers' MTP layer run on the target's last hidden states, and the same tokens."""
    prompt = prompts(2)[1]
    proposer = speculative.engine.proposer
    rounds = []
    sample = proposer._sample

    def recording(logits, sampling):
        drawn = sample(logits, sampling)
        rounds.append((logits.clone(), drawn))
        return drawn

    proposer._sample = recording
    try:
        (output,) = speculative.generate([prompt], SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True),
                                         use_tqdm=False)
    finally:
        del proposer._sample
    first = output.outputs[0].token_ids[0]
    (logits_1, (proposal_1,)), (logits_2, (proposal_2,)) = rounds[:2]

    reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    # transformers finds GLM's MTP tensors by the published models' layer counts only (46 and 92).
    reference._keys_to_ignore_on_load_unexpected = {rf"model\.layers\.{MTP_INDEX}\..*"}
    layer = MtpModel.from_pretrained(reference).eval()
    ids = torch.tensor([prompt + [first]])
    with torch.no_grad():
        states = reference(ids[:, :-1], output_hidden_states=True).hidden_states[-1]
        cache = MtpCache(config=reference.config.get_mtp_config())
        positions = torch.arange(1, len(prompt) + 1).unsqueeze(0)
        chain = layer.forward_layer(0, states, positions, cache, input_ids=ids[:, 1:])
        expected_1 = layer._project_to_logits(chain[:, -1])
        chain = layer.forward_layer(0, chain[:, -1:], positions[:, -1:] + 1, cache,
                                    input_ids=torch.tensor([[proposal_1]]))
        expected_2 = layer._project_to_logits(chain[:, -1])
    torch.testing.assert_close(logits_1, expected_1, atol=1e-4, rtol=0)
    torch.testing.assert_close(logits_2, expected_2, atol=1e-4, rtol=0)
    assert [proposal_1, proposal_2] == [int(expected_1.argmax()), int(expected_2.argmax())]


def test_greedy_output_with_logprobs_and_n_is_unchanged(plain, speculative):
    params = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True, logprobs=2, n=2)
    expected, got = (llm.generate(prompts(3), params, use_tqdm=False) for llm in (plain, speculative))
    assert [[c.token_ids for c in o.outputs] for o in got] == [[c.token_ids for c in o.outputs] for o in expected]
    assert_same_logprobs(*([[{token_id: entry.logprob for token_id, entry in position.items()} for position in c.logprobs]
                            for output in outputs for c in output.outputs] for outputs in (got, expected)))
    stats = speculative.engine.get_stats().spec_decode
    assert stats.num_draft_tokens > 0
    print(f"MTP acceptance rate with random weights: {stats.acceptance_rate:.3f}")
    assert_whole(speculative)


def test_seeded_sampled_output_with_n_is_unchanged(plain, speculative):
    params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=12, ignore_eos=True, seed=5, n=2,
                            repetition_penalty=1.1)
    assert completions(speculative, prompts(3), params) == completions(plain, prompts(3), params)


def test_sampled_tokens_follow_the_targets_distribution(copying_folder, plain):
    """Chi-square over 2000 seeded draws of the first verified position (the token after the first one), proposed
    by the state-copying layer, which is often wrong: the kept-or-drawn-anew token must follow the target's top-4
    distribution (3 degrees of freedom; the bound, 16.27, is exceeded with probability 0.001 by a sampler that is
    right)."""
    prompt = prompts(1)[0]
    requests = DRAWS // MAX_N  # each request reads the prompt once for its n completions, seeded seed .. seed + n - 1
    params = [SamplingParams(temperature=1.0, top_k=4, max_tokens=3, ignore_eos=True, seed=MAX_N * i, n=MAX_N)
              for i in range(requests)]
    # Every draw in one batch: a few steps of many rows cost less than many steps of few.
    llm = LLM(model=str(copying_folder), dtype="float32", block_size=4, speculative_config=mtp(2), max_num_seqs=DRAWS,
              max_num_batched_tokens=4 * DRAWS)
    outputs = [c.token_ids for output in llm.generate([prompt] * requests, params, use_tqdm=False)
               for c in output.outputs]
    stats = llm.engine.get_stats().spec_decode
    assert stats.num_drafts == DRAWS  # every draw's second token was proposed ...
    assert 0 < stats.num_accepted_tokens < stats.num_draft_tokens  # ... some kept, some drawn anew
    print(f"MTP acceptance rate of the state-copying layer at temperature 1: {stats.acceptance_rate:.3f}")
    firsts = [tokens[0] for tokens in outputs]
    first = max(set(firsts), key=firsts.count)
    seconds = [tokens[1] for tokens in outputs if tokens[0] == first]
    (reference,) = plain.generate([prompt + [first]], SamplingParams(temperature=0.0, max_tokens=1, logprobs=4),
                                  use_tqdm=False)
    weights = {token_id: math.exp(entry.logprob) for token_id, entry in reference.outputs[0].logprobs[0].items()}
    total = sum(weights.values())
    assert set(seconds) <= set(weights)
    chi_square = sum((seconds.count(token_id) - len(seconds) * weight / total) ** 2 / (len(seconds) * weight / total)
                     for token_id, weight in weights.items())
    assert chi_square < 16.27, (chi_square, len(seconds))


def test_a_layer_that_passes_the_state_through_proposes_the_latest_token(copying_folder, plain):
    """Its proposals are the token the target just chose, k times; kept wherever the target repeats it."""
    llm = LLM(model=str(copying_folder), dtype="float32", block_size=4, speculative_config=mtp(3))
    proposer = llm.engine.proposer
    propose = proposer.propose
    mismatches = []

    def checking(seqs, max_lengths):
        proposals = propose(seqs, max_lengths)
        mismatches.extend((seq.token_ids[-1], proposed) for seq, proposed in zip(seqs, proposals)
                          if proposed != [seq.token_ids[-1]] * len(proposed))
        return proposals

    proposer.propose = checking
    repeating = [[7] * 12, [40, 41] * 6]
    params = SamplingParams(temperature=0.0, max_tokens=10, ignore_eos=True)
    expected = completions(plain, repeating, params)
    assert completions(llm, repeating, params) == expected
    assert mismatches == []
    assert any(a == b for ((tokens, _),) in expected for a, b in zip(tokens, tokens[1:]))  # the target repeats itself
    stats = llm.engine.get_stats().spec_decode
    assert stats.num_accepted_tokens > 0  # ... and keeps those proposals
    print(f"MTP acceptance rate of the state-copying layer: {stats.acceptance_rate:.3f}")


def test_a_checkpoint_without_its_mtp_layer_is_refused(tmp_path, folder):
    missing = tmp_path / "missing"
    shutil.copytree(folder, missing)
    (missing / MTP_SHARD).unlink()
    index = json.loads((missing / "model.safetensors.index.json").read_text())
    index["weight_map"] = {name: shard for name, shard in index["weight_map"].items() if shard != MTP_SHARD}
    (missing / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match=r"holds no tensors of its multi-token prediction layer \(model\.layers\.3\.\*\)"):
        LLM(model=str(missing), dtype="float32", speculative_config=mtp(2))

    config = json.loads((missing / "config.json").read_text())
    (missing / "config.json").write_text(json.dumps(config | {"num_nextn_predict_layers": 0}))
    with pytest.raises(ValueError, match="sets num_nextn_predict_layers to 0, so the checkpoint has no multi-token "
                                         "prediction layer; choose method 'ngram' or 'draft_model'"):
        LLM(model=str(missing), dtype="float32", speculative_config=mtp(2))


def test_an_architecture_without_mtp_layers_is_refused(tmp_path):
    dense = make_tiny_checkpoint("llama", tmp_path / "llama")
    with pytest.raises(ValueError, match="speculative method 'mtp' needs a model with multi-token prediction layers "
                                         r"\(Glm4MoeForCausalLM\); LlamaForCausalLM has none"):
        LLM(model=str(dense), dtype="float32", speculative_config=mtp(2))


def test_mtp_takes_no_model_and_one_process():
    with pytest.raises(ValueError, match="model is read only by method 'draft_model'; method 'mtp' needs no model"):
        parse_speculative_config({"method": "mtp", "num_speculative_tokens": 2, "model": "x"})
    with pytest.raises(ConfigError, match="method 'mtp' runs its proposer in the engine's own process and needs "
                                          "tensor_parallel_size 1"):
        AutoGLMConfig(tensor_parallel_size=2, speculative_config=mtp(2))


def test_preemption_and_prefix_cache_hits_keep_outputs(copying_folder, plain):
    """A tiny KV pool preempts sequences, and a second pass reads the prompts from the prefix cache: the layer's
    K/V of positions the target did not compute this time is whatever the slots hold, and outputs stay exact."""
    probe = LLM(model=str(copying_folder), dtype="float32", block_size=4, kv_cache_memory=1 << 20)
    llm = LLM(model=str(copying_folder), dtype="float32", block_size=4, speculative_config=mtp(2),
              kv_cache_memory=kv_bytes_for_blocks(probe, 8), max_num_batched_tokens=64)
    repeating = [[7 + i] * (6 + 2 * i) for i in range(4)]
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    expected = completions(plain, repeating, params)
    for _ in range(2):
        assert completions(llm, repeating, params) == expected
    assert llm.engine.scheduler.num_preemptions > 0 and llm.engine.block_manager.prefix_cache_hits > 0
    assert llm.engine.get_stats().spec_decode.num_accepted_tokens > 0
    assert_whole(llm)
