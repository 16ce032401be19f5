"""The tiny model of the KV tier tests, and the logits their restored blocks must give."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from tests.engine.tensor_parallel import conftest as tensor_parallel_fixtures
from tests.engine.kv_tiers.scenario import FIRST_TURN, SECOND_TURN, make_llm, run_alone
from tests.tiny_models import make_tiny_checkpoint


@dataclass(frozen=True)
class ReferenceLogits:
    prefix_hit: torch.Tensor  # the second turn with the prefix still in the pool
    recomputed: torch.Tensor  # the second turn with prefix caching off


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    return make_tiny_checkpoint("qwen2", tmp_path_factory.mktemp("kv-tiers-qwen2"))


@pytest.fixture(scope="session")
def reference(model_dir) -> ReferenceLogits:
    roomy = make_llm(model_dir).engine
    run_alone(roomy, FIRST_TURN)
    prefix_hit, num_cached = run_alone(roomy, SECOND_TURN)
    assert num_cached == 40
    recomputed, _ = run_alone(make_llm(model_dir, enable_prefix_caching=False).engine, SECOND_TURN)
    return ReferenceLogits(prefix_hit, recomputed)


# Torch's thread count, which a tensor-parallel rank 0 claims, restored after the test.
restored_threads = tensor_parallel_fixtures.restored_threads
