"""Build a model from a Hugging Face checkpoint folder, straight into its target dtype and device.

The model is constructed with the target device and dtype as defaults, its parameters
uninitialised, then filled tensor by tensor from the safetensors files: no float32 copy
of the whole model ever exists, and at most one checkpoint tensor is in host memory at a time.
Once all are loaded, each projection's linear method post-processes its weights.
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn

from autoglm.models.linear_method import LinearMethods, process_weights_after_loading
from autoglm.models.model_config import ModelConfig
from autoglm.models.registry import model_class_for
from autoglm.models.weight_loading import checkpoint_names_elsewhere

_DTYPES_BY_NAME = {
    "float32": torch.float32,
    "float": torch.float32,
    "float16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
}
_SHARD_INDEX = "model.safetensors.index.json"


def resolve_dtype(name: str, model_config: ModelConfig) -> torch.dtype:
    """The dtype for a user's choice; "auto" keeps the checkpoint's (float32 when it names none)."""
    if name == "auto":
        if model_config.torch_dtype is None:
            return torch.float32
        checkpoint_dtype = _DTYPES_BY_NAME.get(model_config.torch_dtype)
        if checkpoint_dtype is None:
            raise ValueError(
                f"the checkpoint's dtype '{model_config.torch_dtype}' is not supported; "
                f"choose one of: {', '.join(_DTYPES_BY_NAME)}"
            )
        return checkpoint_dtype
    dtype = _DTYPES_BY_NAME.get(name)
    if dtype is None:
        raise ValueError(f"unknown dtype '{name}'; choose one of: auto, {', '.join(_DTYPES_BY_NAME)}")
    return dtype


def safetensors_files(folder: Path) -> list[Path]:
    """The checkpoint's weight files: those its shard index names, else every ``*.safetensors``."""
    index_file = folder / _SHARD_INDEX
    if index_file.is_file():
        weight_map = json.loads(index_file.read_text()).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ValueError(f"{index_file} has no 'weight_map' of tensor names to files")
        files = [folder / name for name in sorted(set(weight_map.values()))]
    else:
        files = sorted(folder.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no *.safetensors weight files in model folder {folder}")
    for file in files:
        if not file.is_file():
            raise FileNotFoundError(f"weight file {file} named by {index_file} does not exist")
    return files


def iter_checkpoint_tensors(files: list[Path],
                            skipped: Collection[str] = ()) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, tensor)`` one at a time, read on the CPU from each file in turn; ``skipped`` names are
    never read (another rank's experts)."""
    for file in files:
        with safe_open(str(file), framework="pt", device="cpu") as reader:
            for name in reader.keys():
                if name not in skipped:
                    yield name, reader.get_tensor(name)


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[None]:
    """Parameters created inside are of `dtype`, as the checkpoint's weights are (the MTP layer's loader too)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def load_model(path: str | Path, dtype: torch.dtype, device: torch.device, config: ModelConfig | None = None,
               linear_methods: LinearMethods | None = None,
               model_class: Callable[[ModelConfig, LinearMethods], nn.Module] | None = None) -> tuple[nn.Module, ModelConfig]:
    """Build the model ``config.json`` describes (or ``config``, already read from it) on ``device``
    in ``dtype`` with ``linear_methods`` (unquantized where not given), and load its weights. ``model_class``
    builds another model of the checkpoint than its architecture's (a pooling engine's)."""
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder {folder} does not exist")
    config = config or ModelConfig.from_pretrained(folder)
    model_class = model_class or model_class_for(config.architecture)
    files = safetensors_files(folder)
    with torch.device(device), default_dtype(dtype):
        model = model_class(config, linear_methods or LinearMethods())
    model.load_weights(iter_checkpoint_tensors(files, checkpoint_names_elsewhere(model)))
    process_weights_after_loading(model)
    return model.eval(), config
