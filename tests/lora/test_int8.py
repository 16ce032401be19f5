"""With int8 base weights (quantized at load) a mixed batch gives what transformers + PEFT give over the base
weights the compressed-tensors package quantizes and dequantizes: the adapters go through the linear-method seam
unchanged, float32 activations both sides, log-probs within 1e-4."""
from __future__ import annotations

import pytest

from autoglm import LLM
from tests.lora.test_parity import LOGPROB_TOLERANCE, assert_rows_match, greedy_params, mixed_batch
from tests.models.quantized_checkpoints import package_args, package_scales

NAMES = [None, "everything"]  # the adapter on every projection kind


def int8_round_trip(weight):
    from compressed_tensors.quantization.lifecycle.forward import fake_quantize

    args = package_args(8, None)
    return fake_quantize(weight, *package_scales(weight, args), args)


@pytest.mark.timeout(120)
def test_int8_base_weights_with_adapters_match_peft_over_dequantized_weights(lora_case):
    references = {name: lora_case.reference(name, int8_round_trip, kind="int8") for name in NAMES}
    rows, prompts, requests = mixed_batch(lora_case, NAMES)
    llm = LLM(model=str(lora_case.base), dtype="float32", device="cpu", quantization="int8", enable_lora=True,
              max_loras=2, kv_cache_memory=1 << 20)
    outputs = llm.generate(prompts, greedy_params(), use_tqdm=False, lora_request=requests)
    assert_rows_match(outputs, rows, references, LOGPROB_TOLERANCE)
