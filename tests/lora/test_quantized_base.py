"""With int8 or int4 base weights (quantized at load) a mixed batch gives what transformers + PEFT give over the
base weights the compressed-tensors package quantizes and dequantizes: the adapters go through the linear-method
seam unchanged, float32 activations both sides, log-probs within 1e-4."""
from __future__ import annotations

import pytest

from autoglm import LLM
from tests.lora.test_parity import LOGPROB_TOLERANCE, assert_rows_match, greedy_params, mixed_batch
from tests.models.quantized_checkpoints import package_args, package_scales

NAMES = [None, "everything"]  # the adapter on every projection kind


def round_trip(bits: int, group_size: int | None):
    """What the package's quantize-then-dequantize makes of a weight."""
    from compressed_tensors.quantization.lifecycle.forward import fake_quantize

    args = package_args(bits, group_size)
    return lambda weight: fake_quantize(weight, *package_scales(weight, args), args)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("bits", "group_size"), [(8, None), (4, 32)], ids=["int8-channel", "int4-group32"])
def test_quantized_base_weights_with_adapters_match_peft_over_dequantized_weights(lora_case, bits, group_size):
    quantize = round_trip(bits, group_size)
    references = {name: lora_case.reference(name, quantize, kind=f"int{bits}") for name in NAMES}
    rows, prompts, requests = mixed_batch(lora_case, NAMES)
    llm = LLM(model=str(lora_case.base), dtype="float32", device="cpu", quantization=f"int{bits}",
              quantization_group_size=group_size, enable_lora=True, max_loras=2, kv_cache_memory=1 << 20)
    outputs = llm.generate(prompts, greedy_params(), use_tqdm=False, lora_request=requests)
    assert_rows_match(outputs, rows, references, LOGPROB_TOLERANCE)
