"""A mixed batch of the base model and three adapters gives, row by row, what transformers + PEFT give with that
row's adapter: the same greedy tokens, log-probs within 1e-4 in float32."""
from __future__ import annotations

import pytest

from autoglm import LLM, SamplingParams
from autoglm.lora_request import LoRARequest
from tests.lora.adapters import AdapterSpec, make_adapter, peft_reference
from tests.lora.conftest import NUM_NEW_TOKENS, PROMPTS
from tests.tiny_models import make_tiny_checkpoint

LOGPROB_TOLERANCE = 1e-4
NAMES = [None, "attention", "mlp", "everything"]


def greedy_params() -> SamplingParams:
    return SamplingParams(temperature=0.0, max_tokens=NUM_NEW_TOKENS, ignore_eos=True, logprobs=0)


def mixed_batch(lora_case, names):
    """Every prompt once per adapter name, interleaved so that each step mixes adapters."""
    rows = [(name, index) for index in range(len(PROMPTS)) for name in names]
    prompts = [PROMPTS[index] for _, index in rows]
    requests = [None if name is None else lora_case.adapters[name] for name, _ in rows]
    return rows, prompts, requests


def assert_rows_match(outputs, rows, references, tolerance):
    for output, (name, index) in zip(outputs, rows):
        reference = references[name]
        completion = output.outputs[0]
        assert completion.token_ids == reference.token_ids[index], f"adapter {name}, prompt {index}: tokens differ"
        got = [next(iter(position.values())).logprob for position in completion.logprobs]
        for step, (a, b) in enumerate(zip(got, reference.logprobs[index])):
            assert abs(a - b) < tolerance, f"adapter {name}, prompt {index}, token {step}: logprob {a} vs {b}"


@pytest.fixture(scope="module")
def references(lora_case):
    references = {name: lora_case.reference(name) for name in NAMES}
    for name in NAMES[1:]:  # each adapter changes the continuations, or the test would show nothing
        assert references[name].token_ids != references[None].token_ids
    return references


@pytest.mark.timeout(120)
def test_mixed_batch_of_base_and_three_adapters_matches_peft(lora_case, references):
    rows, prompts, requests = mixed_batch(lora_case, NAMES)
    llm = LLM(model=str(lora_case.base), dtype="float32", enable_lora=True, max_loras=3, kv_cache_memory=1 << 20)
    outputs = llm.generate(prompts, greedy_params(), use_tqdm=False, lora_request=requests)
    assert_rows_match(outputs, rows, references, LOGPROB_TOLERANCE)
    assert {request.lora_name for request in llm.engine.list_loras()} == set(NAMES[1:])


@pytest.mark.timeout(120)
def test_one_slot_runs_two_adapters_in_flight_by_turns(lora_case, references):
    """max_loras=1: a step holds one adapter's rows (and the base's); both adapters' requests still finish with
    their own tokens."""
    names = [None, "attention", "mlp"]
    rows, prompts, requests = mixed_batch(lora_case, names)
    llm = LLM(model=str(lora_case.base), dtype="float32", enable_lora=True, max_loras=1, max_cpu_loras=2,
              kv_cache_memory=1 << 20)
    outputs = llm.generate(prompts, greedy_params(), use_tqdm=False, lora_request=requests)
    assert_rows_match(outputs, rows, references, LOGPROB_TOLERANCE)


@pytest.mark.timeout(120)
def test_an_adapter_whose_turn_comes_while_no_sequence_slot_is_free_leaves_no_step_empty(lora_case, references):
    """max_num_seqs=2 runs two requests of one adapter; the third request's adapter gets the turn but cannot be
    admitted, so the running adapter takes the step rather than leaving it empty (which would stall the engine)."""
    names = ["attention", "attention", "mlp"]
    prompts = [PROMPTS[0], PROMPTS[1], PROMPTS[2]]
    llm = LLM(model=str(lora_case.base), dtype="float32", enable_lora=True, max_loras=1, max_cpu_loras=2,
              max_num_seqs=2, kv_cache_memory=1 << 20)
    outputs = llm.generate(prompts, greedy_params(), use_tqdm=False,
                           lora_request=[lora_case.adapters[name] for name in names])
    assert_rows_match(outputs, list(zip(names, range(3))), references, LOGPROB_TOLERANCE)


@pytest.mark.timeout(120)
def test_glm4_adapter_on_its_fused_gate_up_projection_matches_peft(tmp_path):
    """GLM-4's checkpoints fuse gate and up into mlp.gate_up_proj, and PEFT adapters target it by that name."""
    base = make_tiny_checkpoint("glm4", tmp_path / "glm4")
    spec = AdapterSpec(8, 16, ("q_proj", "v_proj", "gate_up_proj", "down_proj"))
    adapter = LoRARequest("fused", 1, str(make_adapter(base, tmp_path / "fused", spec, seed=5)))
    reference = peft_reference(base, tmp_path / "fused", PROMPTS, NUM_NEW_TOKENS)
    assert reference.token_ids != peft_reference(base, None, PROMPTS, NUM_NEW_TOKENS).token_ids
    llm = LLM(model=str(base), dtype="float32", enable_lora=True, kv_cache_memory=1 << 20)
    outputs = llm.generate(PROMPTS, greedy_params(), use_tqdm=False, lora_request=adapter)
    assert_rows_match(outputs, [("fused", index) for index in range(len(PROMPTS))], {"fused": reference},
                      LOGPROB_TOLERANCE)
