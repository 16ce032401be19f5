"""The prefix cache never hands one adapter's blocks (or the base model's) to another: the adapter's content digest
is part of every block's hash. The same adapter does hit its own blocks."""
from __future__ import annotations

import pytest

from autoglm import LLM, SamplingParams
from autoglm.engine.sched.block_manager import hash_block

PROMPT = list(range(3, 3 + 40))  # several full blocks


@pytest.mark.timeout(120)
def test_same_prompt_under_two_adapters_and_the_base_shares_no_block(lora_case):
    llm = LLM(model=str(lora_case.base), dtype="float32", enable_lora=True, max_loras=2, max_cpu_loras=2,
              kv_cache_memory=1 << 20, block_size=8)
    params = SamplingParams(temperature=0.0, max_tokens=1)
    engine = llm.engine
    for adapter in (None, lora_case.adapters["attention"], lora_case.adapters["mlp"]):
        hits = engine.block_manager.prefix_cache_hits
        llm.generate([PROMPT], params, use_tqdm=False, lora_request=adapter)
        assert engine.block_manager.prefix_cache_hits == hits, f"{adapter}: hit another's blocks"
    hits = engine.block_manager.prefix_cache_hits
    output = llm.generate([PROMPT], params, use_tqdm=False, lora_request=lora_case.adapters["mlp"])[0]
    assert engine.block_manager.prefix_cache_hits > hits and output.num_cached_tokens > 0


def test_block_hash_takes_the_adapter_digest():
    tokens = [1, 2, 3, 4]
    base = hash_block(b"", tokens, b"")
    assert hash_block(b"", tokens, b"", adapter=b"a" * 16) not in (base, hash_block(b"", tokens, b"", adapter=b"b" * 16))
    assert hash_block(b"", tokens, b"", adapter=b"") == base
