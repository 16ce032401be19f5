"""int8/int4 weights split over 2 gloo ranks compute what the same quantized model computes in one process:
quantized at load time (a row-parallel layer's per-row scale spans both ranks' columns) or read from a
compressed-tensors checkpoint (packed int4 words, group scales and stored shapes cut per rank)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from autoglm.models.linear_method import WeightQuantization
from tests.distributed.ranks import run_on_ranks
from tests.distributed.sharded_runs import ModelRun, run_each, run_model
from tests.models.quantized_checkpoints import save_with_package_compressor
from tests.tiny_models import make_tiny_checkpoint

AT_LOAD = {  # name -> (quantization, group size, family)
    "int8-channel-at-load": ("int8", None, "qwen2"),
    "int4-group32-at-load": ("int4", 32, "llama"),
}
STORED = {"int8-channel-stored": (8, None), "int4-group32-stored": (4, 32)}  # name -> (bits, group size)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[ModelRun, list[ModelRun]]]:
    """Per case: the unsharded run, and each rank's run."""
    root = tmp_path_factory.mktemp("sharded-quantized")
    cases: dict[str, tuple[Path, WeightQuantization | None]] = {
        name: (make_tiny_checkpoint(family, root / name), WeightQuantization.from_settings(method, group_size))
        for name, (method, group_size, family) in AT_LOAD.items()
    }
    float_dir = make_tiny_checkpoint("qwen2", root / "float")
    for name, (bits, group_size) in STORED.items():
        cases[name] = (save_with_package_compressor(float_dir, bits, group_size, root / name), None)
    per_rank = run_on_ranks(run_each, root, [(str(path), quantization) for path, quantization in cases.values()])
    return {name: (run_model(*case), [rank_runs[i] for rank_runs in per_rank])
            for i, (name, case) in enumerate(cases.items())}


@pytest.mark.parametrize("case", [*AT_LOAD, *STORED])
def test_every_rank_computes_the_unsharded_quantized_logits(runs, case: str) -> None:
    whole, ranks = runs[case]
    for rank in ranks:
        torch.testing.assert_close(rank.logits, whole.logits, atol=1e-5, rtol=0)
        assert rank.weight_bytes < whole.weight_bytes * 0.75
