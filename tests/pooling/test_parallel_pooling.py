"""Pooling across processes: embeddings and classifier logits of two tensor-parallel ranks, and of two pipeline
stages (the engine's process, the last, pools), equal those of one process, which the other pooling tests hold
to transformers."""
from __future__ import annotations

import pytest
import torch

from autoglm import LLM
from tests.engine.tensor_parallel import conftest as tensor_parallel_fixtures
from tests.pooling.checkpoints import make_classifier_checkpoint, make_embedding_checkpoint

PROMPTS = [[5, 6, 7, 8, 9, 10], [11, 12, 13] * 7, [40]]
TOLERANCE = 1e-5  # float32: two ranks sum the same products in another order

restored_threads = tensor_parallel_fixtures.restored_threads


def pooled(model_dir, call: str, **parallel) -> list[torch.Tensor]:
    with LLM(str(model_dir), dtype="float32", max_context_len=128, kv_cache_memory="2MiB", **parallel) as llm:
        outputs = getattr(llm, call)(PROMPTS)
    return [torch.tensor(output.embedding if call == "embed" else output.logits) for output in outputs]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("parallel", [{"tensor_parallel_size": 2}, {"pipeline_parallel_size": 2}],
                         ids=["tensor-parallel", "pipeline-parallel"])
def test_two_ranks_pool_what_one_process_pools(tmp_path, parallel, restored_threads):
    embedding_model = make_embedding_checkpoint(tmp_path / "embedding")
    classifier = make_classifier_checkpoint("qwen2", tmp_path / "classifier", num_labels=3)
    for model_dir, call in ((embedding_model, "embed"), (classifier, "classify")):
        alone, split = pooled(model_dir, call), pooled(model_dir, call, **parallel)
        for mine, theirs in zip(split, alone):
            assert torch.allclose(mine, theirs, rtol=0, atol=TOLERANCE), (call, (mine - theirs).abs().max())
