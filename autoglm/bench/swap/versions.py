"""The two versions a swap bench serves: a checkpoint and a second one of the same shape (by default a copy
with slightly different weights), registered as versions 1 and 2 of one model in a registry of the bench's own."""
from __future__ import annotations

import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from autoglm.bench.lib.errors import ServeBenchError
from autoglm.registry import DirectoryRegistry

MODEL_NAME = "swap"
FIRST_VERSION, SECOND_VERSION = "1", "2"
# Each weight scaled by 1 + this much normal noise: the same shapes and dtypes, other bytes and other answers.
WEIGHT_NOISE = 0.01
WEIGHT_PATTERN = "*.safetensors"


def perturbed_copy(source: Path, destination: Path, seed: int) -> Path:
    """A copy of the checkpoint folder whose floating-point weights are each slightly scaled."""
    weight_files = sorted(source.glob(WEIGHT_PATTERN))
    if not weight_files:
        raise ServeBenchError(f"{source} holds no {WEIGHT_PATTERN} weight files to copy with other weights; pass "
                              "--model-b, a second checkpoint of the same shape")
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns(WEIGHT_PATTERN))
    generator = torch.Generator().manual_seed(seed)
    for path in weight_files:
        tensors = load_file(path)
        for name, tensor in tensors.items():
            if tensor.is_floating_point():
                noise = torch.randn(tensor.shape, generator=generator)
                tensors[name] = (tensor.float() * (1 + WEIGHT_NOISE * noise)).to(tensor.dtype)
        save_file(tensors, destination / path.name, metadata={"format": "pt"})
    return destination


def register_versions(registry_dir: Path, first: Path, second: Path) -> None:
    """MODEL_NAME's versions 1 (its stable) and 2 in a directory registry at registry_dir."""
    registry = DirectoryRegistry(registry_dir)
    for version, checkpoint in ((FIRST_VERSION, first), (SECOND_VERSION, second)):
        registry.register(MODEL_NAME, checkpoint, version=version, notes="autoglm bench swap")
