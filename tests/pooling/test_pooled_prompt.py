"""A pooling sequence's vector across chunks: a chunk that starts the prompt again (a preemption recomputes from
the start) resets it, so nothing read before the restart counts twice."""
from __future__ import annotations

import pytest
import torch

from autoglm.engine.pooling.model_kind import PoolingModel
from autoglm.engine.pooling.pooled_prompt import PooledPrompt
from autoglm.pooling_params import PoolingParams


@pytest.mark.parametrize("pooling_type", ["LAST", "MEAN", "CLS"])
def test_a_restarted_prompt_pools_as_if_read_once(pooling_type):
    hidden = torch.randn(10, 4, generator=torch.Generator().manual_seed(0))
    pooled = PooledPrompt(PoolingParams(), PoolingModel("embed", pooling_type, normalize=False))
    chunks = [(0, 4), (4, 7), (0, 3), (3, 8), (8, 10)]  # read 7 positions, preempted, then read all 10
    for start, end in chunks:
        chunk = pooled.chunk(0, start, end, num_prompt_tokens=10)
        rows = hidden[start:end]
        share = {"MEAN": rows.sum(dim=0), "CLS": rows[0] if chunk.starts_prompt else None,
                 "LAST": rows[-1] if chunk.ends_prompt else None}[pooling_type]
        pooled.add(share, chunk.starts_prompt)
    expected = {"MEAN": hidden.mean(dim=0), "CLS": hidden[0], "LAST": hidden[-1]}[pooling_type]
    assert torch.allclose(pooled.result(10), expected, atol=1e-6)


def test_a_score_is_the_sigmoid_and_dimensions_cut_before_normalising():
    score = PooledPrompt(PoolingParams(task="score"), PoolingModel("classify", "LAST", normalize=False))
    score.add(torch.tensor([0.5]), starts_prompt=True)
    assert score.result(3).item() == pytest.approx(torch.sigmoid(torch.tensor(0.5)).item())
    embedding = PooledPrompt(PoolingParams(dimensions=2), PoolingModel("embed", "LAST", normalize=True))
    embedding.add(torch.tensor([3.0, 4.0, 100.0]), starts_prompt=True)
    assert embedding.result(1).tolist() == pytest.approx([0.6, 0.8])
