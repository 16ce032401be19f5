"""Two ranks over gloo give a mixed batch of adapters the tokens and log-probs one rank gives: A of the row-parallel
projections and B of the column-parallel ones are cut like their weights, and the workers install adapters from
the folders the plan names."""
from __future__ import annotations

import pytest

from autoglm import LLM
from tests.lora.test_parity import assert_rows_match, greedy_params, mixed_batch

NAMES = [None, "attention", "mlp", "everything"]


@pytest.mark.timeout(300)
def test_two_ranks_equal_one_rank_with_three_adapters(lora_case, restored_threads):
    references = {name: lora_case.reference(name) for name in NAMES}
    rows, prompts, requests = mixed_batch(lora_case, NAMES)
    with LLM(model=str(lora_case.base), dtype="float32", tensor_parallel_size=2, enable_lora=True, max_loras=2, max_cpu_loras=3,
             kv_cache_memory=1 << 20) as llm:
        outputs = llm.generate(prompts, greedy_params(), use_tqdm=False, lora_request=requests)
    assert_rows_match(outputs, rows, references, 1e-4)
