"""Fair share counts the tokens a tenant is delivered, the proposals speculative decoding kept included."""
from __future__ import annotations

from collections import Counter

import pytest

from autoglm import LLM, SamplingParams
from autoglm.engine.sequence import TenantTag
from tests.tiny_models import make_tiny_checkpoint

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}
REQUESTS_PER_TENANT = 24


def delivered_while_both_wait(engine, tenants: dict[str, TenantTag], prompts: dict[str, list[int]]) -> Counter:
    """Tokens each tenant's requests were handed, over the steps that begin with both tenants
    still having requests waiting to run (so each could have used more than it got)."""
    params = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)
    for i in range(REQUESTS_PER_TENANT):
        for name, tenant in tenants.items():
            engine.add_request(f"{name}{i}", prompts[name], params, tenant=tenant)
    delivered: Counter = Counter()
    while {seq.tenant.id for seq in engine.scheduler.waiting} == set(tenants):
        for output in engine.step():
            delivered[output.request_id.rstrip("0123456789")] += len(output.outputs[0].token_ids)
    for request_id in list(engine.requests):
        engine.abort_request(request_id)
    return delivered


def test_weights_three_to_one_split_the_delivered_tokens_three_to_one_under_speculation(tmp_path):
    """The light tenant's text repeats, so n-gram lookup hands it several tokens a step; charged
    by steps, it would get far more than a quarter."""
    model_dir = make_tiny_checkpoint("qwen2", tmp_path / "qwen2")
    llm = LLM(model=str(model_dir), dtype="float32", block_size=4, max_num_seqs=4, speculative_config=NGRAM)
    tenants = {"heavy": TenantTag("heavy", weight=3.0), "light": TenantTag("light", weight=1.0)}
    prompts = {"heavy": [40 + 7 * j % 90 for j in range(12)], "light": [6, 7, 7, 7]}
    delivered = delivered_while_both_wait(llm.engine, tenants, prompts)
    stats = llm.engine.spec_decode_stats.snapshot()
    assert stats.num_accepted_tokens > delivered["light"] / 4  # kept proposals: several tokens a step
    assert delivered["heavy"] / delivered["light"] == pytest.approx(3.0, rel=0.1)
