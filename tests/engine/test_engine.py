"""Engine behaviour beyond greedy parity: sampling, n > 1, stops, aborts, bad input, accounting."""
from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModelForCausalLM

from autoglm import LLM, AutoGLMConfig, OpenAutoGLM, SamplingParams
from autoglm.config import ConfigError
from autoglm.engine.llm_engine import LLMEngine
from autoglm.errors import InvalidRequestError
from autoglm.outputs import PositionLogprobs, RequestOutput, add_delta
from autoglm.sampling_params import RequestOutputKind
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.tiny_models import make_tiny_checkpoint


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("qwen2"))


@pytest.fixture(scope="module")
def llm(model_dir):
    return LLM(model=str(model_dir), dtype="float32", max_context_len=256, block_size=4)


def assert_idle(llm: LLM) -> None:
    manager = llm.engine.block_manager
    assert not llm.engine.has_unfinished_requests()
    assert manager.num_referenced_blocks() == 0 and manager.num_free_blocks == manager.num_blocks
    manager.check_invariants()


def tight_llm(model_dir, llm: LLM, num_blocks: int, **settings) -> LLM:
    """An engine like ``llm`` (block size 4) whose KV pool holds only ``num_blocks`` blocks."""
    return LLM(model=str(model_dir), dtype="float32", max_context_len=256, block_size=4,
               kv_cache_memory=kv_bytes_for_blocks(llm, num_blocks), **settings)


def drain(engine: LLMEngine, max_steps: int = 1000) -> dict[str, RequestOutput]:
    """Step until every request is done and return their whole outputs, added up from the engine's deltas;
    fail (instead of hanging) if that takes more than ``max_steps``."""
    outputs: dict[str, RequestOutput] = {}
    for _ in range(max_steps):
        if not engine.has_unfinished_requests():
            return {request_id: output for request_id, output in outputs.items() if output.finished}
        for delta in engine.step():
            add_delta(outputs, delta.request_id, delta)
    pytest.fail(f"requests {sorted(engine.requests)} still unfinished after {max_steps} steps")


def assert_same_prompt_logprobs(got: list[PositionLogprobs | None], expected: list[PositionLogprobs | None]) -> None:
    assert len(got) == len(expected)
    assert got[0] is None and expected[0] is None
    for position, (a, b) in enumerate(zip(got[1:], expected[1:]), start=1):
        assert a.keys() == b.keys(), f"position {position}: different tokens"
        for token_id in a:
            assert a[token_id].logprob == pytest.approx(b[token_id].logprob, abs=1e-5), f"position {position}"


def test_seeds_api_builds_the_same_engine(model_dir):
    config = AutoGLMConfig(model=str(model_dir), use_paged_attention=True, block_size=16, max_context_len=8192,
                           dtype="float32")
    model = OpenAutoGLM.from_config(config)
    out = model.generate("hello world", SamplingParams(temperature=0, max_tokens=5), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 5
    assert model.engine.max_context_len == 512  # capped at the checkpoint's max_position_embeddings


def test_seeded_sampling_ignores_batch_composition(llm):
    seeded = SamplingParams(temperature=1.0, top_p=0.9, seed=1234, max_tokens=20, ignore_eos=True)
    alone = llm.generate([[5, 6, 7, 8]], seeded, use_tqdm=False)[0].outputs[0].token_ids
    noisy = SamplingParams(temperature=1.0, max_tokens=25, ignore_eos=True)
    crowd = llm.generate([[9, 9, 9], [5, 6, 7, 8], list(range(3, 40))], [noisy, seeded, noisy], use_tqdm=False)
    assert crowd[1].outputs[0].token_ids == alone
    again = llm.generate([[5, 6, 7, 8]], seeded, use_tqdm=False)[0].outputs[0].token_ids
    assert again == alone
    assert_idle(llm)


def test_n_copies_share_the_prompt_blocks(llm):
    engine = llm.engine
    prompt = list(range(3, 30))  # 27 tokens: 6 full blocks of 4 can be shared
    params = SamplingParams(n=3, temperature=1.0, seed=7, max_tokens=6, ignore_eos=True,
                            output_kind=RequestOutputKind.FINAL_ONLY)  # the steps below read no output
    engine.add_request("fork", prompt, params)
    parent = engine.requests["fork"].completions[0].seq
    while engine.requests["fork"].pending_children:
        engine.step()
    assert all(not seq.block_table for seq in engine.scheduler.waiting)  # they take blocks on admission
    engine.step()
    first_block = parent.block_table[0]
    assert engine.block_manager._ref_counts[first_block] == 3
    completions = drain(engine)["fork"].outputs
    assert [c.index for c in completions] == [0, 1, 2]
    assert all(len(c.token_ids) == 6 for c in completions)
    assert len({tuple(c.token_ids) for c in completions}) > 1  # different seeds, different samples
    assert_idle(llm)


def test_each_step_hands_out_only_what_is_new(llm):
    """A long generation's per-step output stays one token's worth (no copy of the history), and
    the deltas add up to what generate returns, log-prob token texts apart: those the engine leaves undecoded."""
    params = SamplingParams(temperature=0, max_tokens=150, ignore_eos=True, logprobs=3)
    llm.engine.add_request("long", [5, 6, 7], params)
    deltas = []
    while llm.engine.has_unfinished_requests():
        deltas.extend(llm.engine.step())
    steps = [delta.outputs[0] for delta in deltas]
    assert [(len(step.token_ids), len(step.logprobs)) for step in steps] == [(1, 1)] * 150
    assert all(entry.decoded_token is None for step in steps for entry in step.logprobs[0].values())
    text_sent = sum(len(step.text) for step in steps)
    whole = drain_into_one(deltas).outputs[0]
    expected = llm.generate([[5, 6, 7]], params, use_tqdm=False)[0].outputs[0]
    assert (whole.text, whole.token_ids, whole.finish_reason) == (expected.text, expected.token_ids, "length")
    assert text_sent == len(expected.text)  # no text is sent twice
    assert whole.cumulative_logprob == pytest.approx(expected.cumulative_logprob)
    tokenizer = llm.get_tokenizer()
    for position in expected.logprobs:
        assert all(entry.decoded_token == tokenizer.decode([token_id]) for token_id, entry in position.items())
    assert_idle(llm)


def drain_into_one(deltas: list[RequestOutput]) -> RequestOutput:
    """One request's deltas added up (into the first of them)."""
    outputs: dict[str, RequestOutput] = {}
    for delta in deltas:
        add_delta(outputs, delta.request_id, delta)
    (whole,) = outputs.values()
    return whole


def test_stop_strings_tokens_and_min_tokens(llm):
    greedy = SamplingParams(temperature=0, max_tokens=24, ignore_eos=True)
    full = llm.generate("the quick brown", greedy, use_tqdm=False)[0].outputs[0]
    stop = full.text[len(full.text) // 2 : len(full.text) // 2 + 2]
    cut = llm.generate("the quick brown", SamplingParams(temperature=0, max_tokens=24, ignore_eos=True, stop=[stop]),
                       use_tqdm=False)[0].outputs[0]
    assert cut.finish_reason == "stop" and cut.stop_reason == stop
    assert cut.text == full.text[: full.text.index(stop)]
    token = full.token_ids[5]
    by_token = llm.generate("the quick brown", SamplingParams(temperature=0, max_tokens=24, ignore_eos=True,
                                                               stop_token_ids=[token]), use_tqdm=False)[0].outputs[0]
    assert by_token.token_ids == full.token_ids[: full.token_ids.index(token) + 1]
    assert by_token.stop_reason == token
    late = llm.generate("the quick brown", SamplingParams(temperature=0, max_tokens=24, ignore_eos=True,
                                                           stop_token_ids=[token], min_tokens=20), use_tqdm=False)
    assert len(late[0].outputs[0].token_ids) >= 20
    assert_idle(llm)


def test_prompt_logprobs_match_transformers(llm, model_dir):
    prompt = [4, 17, 99, 23, 8, 61, 150, 42, 7, 19, 33]
    out = llm.generate([prompt], SamplingParams(max_tokens=1, prompt_logprobs=2), use_tqdm=False)[0]
    assert out.prompt_logprobs[0] is None and len(out.prompt_logprobs) == len(prompt)
    reference = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.inference_mode():
        logprobs = torch.log_softmax(reference(torch.tensor([prompt])).logits[0].float(), -1)
    for position in range(1, len(prompt)):
        entry = out.prompt_logprobs[position]
        expected = logprobs[position - 1, prompt[position]].item()
        assert abs(entry[prompt[position]].logprob - expected) < 1e-4
        top_ids = logprobs[position - 1].topk(2).indices.tolist()
        assert set(top_ids) <= set(entry)
    assert_idle(llm)


SCORED_PROMPT = list(range(40, 63))  # 23 tokens: five full blocks of 4 and three tokens


@pytest.mark.parametrize("n", [2, 3])
def test_prompt_logprobs_are_scored_once_for_n_completions(llm, n):
    alone = llm.generate([SCORED_PROMPT], SamplingParams(max_tokens=2, prompt_logprobs=1), use_tqdm=False)[0]
    params = SamplingParams(n=n, temperature=1.0, seed=3, max_tokens=4, ignore_eos=True, prompt_logprobs=1)
    out = llm.generate([SCORED_PROMPT], params, use_tqdm=False)[0]
    assert len(out.outputs) == n
    assert_same_prompt_logprobs(out.prompt_logprobs, alone.prompt_logprobs)
    assert_idle(llm)


def test_prompt_logprobs_are_scored_once_across_a_preemption(llm, model_dir):
    alone = llm.generate([SCORED_PROMPT], SamplingParams(max_tokens=2, prompt_logprobs=1), use_tqdm=False)[0]
    # Each request takes 6 of the 12 blocks for its prompt; the first to need a seventh
    # preempts the other, lower-priority one, whose prompt was already scored.
    tight = tight_llm(model_dir, llm, 12)
    engine = tight.engine
    engine.add_request("scored", SCORED_PROMPT, SamplingParams(n=2, temperature=1.0, seed=5, max_tokens=20,
                                                               ignore_eos=True, prompt_logprobs=1), priority=1)
    engine.add_request("urgent", list(range(70, 91)), SamplingParams(max_tokens=20, ignore_eos=True), priority=0)
    outputs = drain(engine)
    assert engine.scheduler.num_preemptions > 0
    assert_same_prompt_logprobs(outputs["scored"].prompt_logprobs, alone.prompt_logprobs)
    assert_idle(tight)


def test_abort_frees_blocks_at_once(llm):
    engine = llm.engine
    engine.add_request("gone", list(range(3, 40)), SamplingParams(max_tokens=50, ignore_eos=True))
    engine.step()
    assert engine.block_manager.num_referenced_blocks() > 0
    assert engine.abort_request("gone")
    assert not engine.abort_request("gone")
    assert_idle(llm)


def test_waiting_children_hold_no_blocks_so_a_bigger_request_can_run(llm, model_dir):
    """An n = 2 request, then a higher-priority one that needs the whole pool: both finish."""
    tight = tight_llm(model_dir, llm, 8)
    engine = tight.engine
    final_only = RequestOutputKind.FINAL_ONLY  # the steps before drain() read no output
    engine.add_request("forked", list(range(3, 12)), SamplingParams(n=2, temperature=1.0, seed=1, max_tokens=8,
                                                                   ignore_eos=True, output_kind=final_only))
    while engine.requests["forked"].pending_children:
        engine.step()
    engine.add_request("whole-pool", list(range(100, 125)),
                       SamplingParams(max_tokens=6, ignore_eos=True, output_kind=final_only), priority=-1)
    for _ in range(3):
        engine.step()
        assert all(not seq.block_table for seq in engine.scheduler.waiting)
    outputs = drain(engine)
    assert len(outputs["whole-pool"].outputs[0].token_ids) == 6
    assert [len(c.token_ids) for c in outputs["forked"].outputs] == [8, 8]
    assert_idle(tight)


def test_a_request_larger_than_the_pool_is_refused_with_both_sizes(llm, model_dir):
    tight = tight_llm(model_dir, llm, 8)
    with pytest.raises(ValueError, match=r"needs 12 KV blocks .* holds only 8"):
        tight.engine.add_request("huge", list(range(3, 28)), SamplingParams(max_tokens=20))
    assert not tight.engine.has_unfinished_requests()


def test_stats_count_requests_not_sequences(llm):
    engine = llm.engine
    engine.add_request("forked", list(range(3, 12)), SamplingParams(n=3, temperature=1.0, max_tokens=20,
                                                                   ignore_eos=True))
    while engine.requests["forked"].pending_children:
        engine.step()
    engine.step()
    stats = engine.get_stats()
    assert (stats.num_running, stats.num_waiting) == (1, 0)
    engine.abort_request("forked")
    assert_idle(llm)


def test_generate_refuses_a_priority_list_of_another_length(llm):
    with pytest.raises(ValueError, match="2 priorities for 3 prompts"):
        llm.generate([[3, 4], [5, 6], [7, 8]], SamplingParams(max_tokens=2), use_tqdm=False, priority=[0, 1])
    assert_idle(llm)


def test_priority_orders_the_queue(model_dir):
    llm = LLM(model=str(model_dir), dtype="float32", max_num_seqs=1)
    engine = llm.engine
    params = SamplingParams(temperature=0, max_tokens=2, ignore_eos=True)
    engine.add_request("low", [3, 4, 5], params, priority=5)
    engine.add_request("high", [3, 4, 6], params, priority=0)
    first_finished = None
    while engine.has_unfinished_requests():
        for output in engine.step():
            if output.finished and first_finished is None:
                first_finished = output.request_id
    assert first_finished == "high"


@pytest.mark.parametrize(
    "prompt, params, message",
    [
        ("", None, "prompt is empty"),
        ([], None, "prompt is empty"),
        ([1, 2, 10_000], None, "out of range"),
        (list(range(3, 260)), SamplingParams(max_tokens=10), "maximum context length is 256"),
        ([3, 4], SamplingParams(max_tokens=300), "you requested 302 tokens"),
    ],
)
def test_bad_requests_are_refused_and_the_engine_keeps_serving(llm, prompt, params, message):
    with pytest.raises(ValueError, match=message):
        llm.engine.add_request("bad", prompt, params)
    assert "bad" not in llm.engine.requests
    out = llm.generate([[3, 4, 5]], SamplingParams(temperature=0, max_tokens=3), use_tqdm=False)
    assert len(out[0].outputs[0].token_ids) == 3
    assert_idle(llm)


def test_priorities_outside_max_abs_priority_are_refused_offline(llm):
    params = SamplingParams(temperature=0, max_tokens=1)
    for priority in (1001, -(10**30)):
        with pytest.raises(InvalidRequestError, match=r"priority must be in \[-1000, 1000\] \(the max_abs_priority"):
            llm.generate(["Hi", "there"], params, priority=[0, priority], use_tqdm=False)
        assert_idle(llm)
    assert len(llm.generate(["Hi"], params, priority=[-1000], use_tqdm=False)[0].outputs[0].token_ids) == 1


def test_a_request_id_in_use_is_refused_and_the_request_under_it_runs_on(llm):
    engine = llm.engine
    engine.add_request("same", [5, 6, 7], SamplingParams(temperature=0, max_tokens=3, ignore_eos=True))
    with pytest.raises(InvalidRequestError, match="request id 'same' is already in use"):
        engine.add_request("same", [8, 9], SamplingParams(max_tokens=1))
    (output,) = drain(engine).values()
    assert output.prompt_token_ids == [5, 6, 7] and len(output.outputs[0].token_ids) == 3
    assert_idle(llm)


@pytest.mark.parametrize("bad", [dict(max_tokens=0), dict(temperature=-1), dict(top_p=0), dict(top_k=-2),
                                 dict(min_p=1.5), dict(repetition_penalty=0), dict(logprobs=21), dict(n=0)])
def test_out_of_range_sampling_values_name_the_parameter(bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        SamplingParams(**bad)


def test_bad_config_file_is_a_clear_error(tmp_path):
    path = tmp_path / "engine.yaml"
    path.write_text("block_size: sixteen\n")
    with pytest.raises(ConfigError, match="block_size"):
        AutoGLMConfig.from_file(path)
    path.write_text("blocksize: 16\n")
    with pytest.raises(ConfigError, match="did you mean 'block_size'"):
        AutoGLMConfig.from_file(path)


def test_hundreds_of_random_requests_with_aborts_leave_the_pool_whole(llm, model_dir):
    """Random prompts, lengths and aborts under a pool small enough to force preemptions; seeded
    n = 2 requests that finish give what the same requests give with room to spare."""
    tight = LLM(model=str(model_dir), dtype="float32", block_size=4, max_num_batched_tokens=48, max_num_seqs=16,
                kv_cache_memory=kv_bytes_for_blocks(llm, 24))
    engine = tight.engine
    rng = random.Random(0)
    shared = [rng.randrange(3, 300) for _ in range(12)]
    requests: dict[str, tuple[list[int], SamplingParams]] = {}
    finished: dict[str, RequestOutput] = {}
    preempted: set[str] = set()

    def step() -> None:
        finished.update((o.request_id, o) for o in engine.step() if o.finished)
        preempted.update(seq.request_id for seq in engine.scheduler.waiting if seq.num_preemptions)
        engine.block_manager.check_invariants()

    for request in range(240):
        prompt = (shared if rng.random() < 0.5 else []) + [rng.randrange(3, 300) for _ in range(rng.randrange(1, 20))]
        params = SamplingParams(temperature=rng.choice([0.0, 1.0]), n=rng.choice([1, 1, 2]),
                                max_tokens=rng.randrange(1, 16), seed=rng.choice([None, request]),
                                output_kind=RequestOutputKind.FINAL_ONLY)
        engine.add_request(str(request), prompt, params)
        requests[str(request)] = (prompt, params)
        for _ in range(rng.randrange(0, 3)):
            step()
        if engine.requests and rng.random() < 0.15:
            engine.abort_request(rng.choice(sorted(engine.requests)))
    while engine.has_unfinished_requests():
        step()
    assert engine.scheduler.num_preemptions > 0
    assert engine.block_manager.prefix_cache_hits > 0
    assert_idle(tight)

    seeded_pairs = [rid for rid in finished if requests[rid][1].seed is not None and requests[rid][1].n == 2]
    assert preempted & set(seeded_pairs), "no seeded n = 2 request was preempted"
    roomy = llm.generate([requests[rid][0] for rid in seeded_pairs], [requests[rid][1] for rid in seeded_pairs],
                         use_tqdm=False)
    for rid, expected in zip(seeded_pairs, roomy):
        got = [c.token_ids for c in finished[rid].outputs]
        assert got == [c.token_ids for c in expected.outputs], f"request {rid} differs from the roomy run"
    assert_idle(llm)
