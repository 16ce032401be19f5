"""The Triton paged-attention kernel compiled for a GPU: every case of the interpreted test, in float32 and
bfloat16. Skipped without CUDA."""
from __future__ import annotations

import pytest
import torch

from tests.attention.triton_attention_cases import CASES, max_error

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CUDA = torch.device("cuda")
# float32 sums in another order; bfloat16 inputs and products against a float32 reference.
TOLERANCES = {torch.float32: 1e-5, torch.bfloat16: 5e-2}


@pytest.mark.parametrize("dtype", TOLERANCES, ids=str)
@pytest.mark.parametrize("case", CASES)
def test_the_compiled_kernel_matches_the_torch_backend(case, dtype):
    assert max_error(**CASES[case], device=CUDA, dtype=dtype) < TOLERANCES[dtype]
