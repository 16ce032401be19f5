"""``autoglm bench quant-memory``: the bytes the engine's model holds with float, int8 and int4 weights.

Each configuration loads the model as the engine does and counts its parameters and buffers, every
tensor once (a tied LM head shares the embedding's). The quantized layers' bytes are compared with
what the same layers hold in the float model; the whole model's bytes include the embedding table,
which stays in float. docs/QUANTIZATION.md's memory table is generated from the file this writes.
"""
from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from autoglm.bench.results.report import dtype_name, machine_info
from autoglm.config import AutoGLMConfig
from autoglm.llm import LLM
from autoglm.model_paths import resolve_model_path
from autoglm.models.linear_method.base import LinearMethodBase
from autoglm.models.linear_method.int_weight_method import IntWeightLinearMethod

FLOAT = "none"
# (quantization, quantize_lm_head): the float model first, every other is compared with it.
VARIANTS = ((FLOAT, False), ("int8", False), ("int8", True), ("int4", False), ("int4", True))
KV_CACHE_MEMORY = "16MiB"  # the cache is not what is measured: keep it small


@dataclass(frozen=True)
class ModelMemory:
    quantization: str
    quantize_lm_head: bool
    group_size: int | None  # int8/int4: input columns per scale; None: one per output row
    compute_dtype: str
    layer_bytes: dict[str, int]  # each linear layer (the LM head included): its own parameters and buffers
    quantized_layers: list[str]  # the layers holding int8/int4 weights
    total_bytes: int  # the whole model, embeddings included, each tensor once

    @property
    def label(self) -> str:
        if self.quantization == FLOAT:
            return f"{self.compute_dtype} (checkpoint)"
        groups = "per channel" if self.group_size is None else f"groups of {self.group_size}"
        return f"{self.quantization} ({groups}), LM head {'quantized' if self.quantize_lm_head else 'float'}"


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of ``tensors``, a tensor seen twice (tied, or registered under two names) counted once."""
    unique = {(tensor.data_ptr(), tensor.nbytes): tensor for tensor in tensors}
    return sum(tensor.nbytes for tensor in unique.values())


def own_tensors(module: nn.Module) -> list[torch.Tensor]:
    return [*module.parameters(recurse=False), *module.buffers(recurse=False)]


def linear_layers(model: nn.Module) -> dict[str, nn.Module]:
    """Every module a linear method computes: the projections and the LM head."""
    return {name: module for name, module in model.named_modules()
            if isinstance(getattr(module, "linear_method", None), LinearMethodBase)}


def model_memory(llm: LLM, config: AutoGLMConfig) -> ModelMemory:
    model = llm.engine.runner.model
    layers = linear_layers(model)
    method = llm.engine.linear_methods.layers
    int_method = method if isinstance(method, IntWeightLinearMethod) else None
    return ModelMemory(
        quantization=config.quantization,
        quantize_lm_head=config.quantize_lm_head,
        group_size=None if int_method is None else int_method.weight_format.group_size,
        compute_dtype=dtype_name(llm.engine.dtype),
        layer_bytes={name: tensor_bytes(own_tensors(module)) for name, module in layers.items()},
        quantized_layers=[name for name, module in layers.items()
                          if isinstance(module.linear_method, IntWeightLinearMethod)],
        total_bytes=tensor_bytes([*model.parameters(), *model.buffers()]),
    )


def measure_quant_memory(model: str | None, group_size: int | None) -> dict[str, Any]:
    """One engine at a time, freed before the next: the float model and each quantized one."""
    model_dir = resolve_model_path(model)
    results = []
    for quantization, quantize_lm_head in VARIANTS:
        config = AutoGLMConfig(model=str(model_dir), kv_cache_memory=KV_CACHE_MEMORY, quantization=quantization,
                               quantization_group_size=group_size if quantization == "int4" else None,
                               quantize_lm_head=quantize_lm_head)
        llm = LLM.from_config(config)
        results.append(model_memory(llm, config))
        del llm
        gc.collect()
        print(f"{results[-1].label}: {results[-1].total_bytes / 2**20:,.1f} MiB", flush=True)
    return {"model": str(model_dir), "variants": [asdict(result) for result in results], "machine": machine_info()}
