"""Compress a written checkpoint's routed experts, which transformers keeps as stacked parameters rather than
``nn.Linear`` modules (so the package's model-wide compression passes them by).

Once saved, each expert's projection is a tensor of its own (``mlp.experts.3.gate_proj.weight``), the name every
reader of the format expects; each is compressed in place by the package's own compressor, with the scales the
engine computes at load time, into the tensors it writes for a linear layer (``weight_packed``, ``weight_shape``,
``weight_scale`` for int4; ``weight``, ``weight_scale`` for int8).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from autoglm.models.linear_method.int_weights import GroupSizeError, IntWeightFormat, quantize

SHARD_INDEX = "model.safetensors.index.json"
EXPERT_WEIGHT = re.compile(r".*\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight")


def compress_saved_experts(out_dir: Path, weight_format: IntWeightFormat, scheme, compressor) -> int:
    """Compress every per-expert projection of the checkpoint in ``out_dir`` with the package's ``compressor``
    class under ``scheme``, updating the shard index where there is one; returns how many it compressed."""
    renamed: dict[str, list[str]] = {}
    for file in sorted(out_dir.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as reader:
            metadata = reader.metadata()
            tensors = {name: reader.get_tensor(name) for name in reader.keys()}
        experts = [name for name in tensors if EXPERT_WEIGHT.fullmatch(name)]
        for name in experts:
            module = name.removesuffix(".weight")
            compressed = _compressed(tensors.pop(name), weight_format, scheme, compressor)
            tensors.update({f"{module}.{key}": value.contiguous() for key, value in compressed.items()})
            renamed[name] = [f"{module}.{key}" for key in compressed]
        if experts:
            save_file(tensors, str(file), metadata=metadata)
    _update_index(out_dir / SHARD_INDEX, renamed)
    return len(renamed)


def check_expert_group_size(weight_format: IntWeightFormat, moe_intermediate_size: int) -> None:
    """Refuse, before anything is written, a group size that does not divide the experts' ``down_proj`` input
    (their other projections take the hidden size, which the decoder's own projections check)."""
    try:
        weight_format.group_size_for(moe_intermediate_size)
    except GroupSizeError as error:
        raise GroupSizeError(f"layer 'mlp.experts.*.down_proj': {error}") from None


def _compressed(weight: torch.Tensor, weight_format: IntWeightFormat, scheme, compressor) -> dict[str, torch.Tensor]:
    _, scale = quantize(weight, weight_format, weight_format.group_size_for(weight.shape[1]))
    state = {"weight": weight, "weight_scale": scale, "weight_zero_point": torch.zeros_like(scale, dtype=torch.int8)}
    return compressor.compress(state, scheme)


def _update_index(index_file: Path, renamed: dict[str, list[str]]) -> None:
    """Point the index's entries for the compressed tensors at the file their float tensor was in."""
    if not index_file.is_file():
        return
    index = json.loads(index_file.read_text())
    weight_map = index["weight_map"]
    for name, new_names in renamed.items():
        file = weight_map.pop(name)
        weight_map.update(dict.fromkeys(new_names, file))
    index_file.write_text(json.dumps(index, indent=2, sort_keys=True))
