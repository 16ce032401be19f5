"""One more safetensors shard in a saved checkpoint, for tensors its transformers class does not hold.

Published checkpoints list such tensors (GLM's multi-token prediction layers) in ``model.safetensors.index.json``
beside the model's own, in shards named ``model-00001-of-00047.safetensors`` and so on; transformers loads the
folder through the index and leaves out what its class does not know.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


def _shard_name(number: int, count: int) -> str:
    return f"model-{number:05d}-of-{count:05d}.safetensors"


def _tensor_bytes(shard: Path) -> int:
    """A shard's size less its header: the bytes of its tensors."""
    with shard.open("rb") as file:
        header_size = struct.unpack("<Q", file.read(8))[0]
    return shard.stat().st_size - 8 - header_size


def add_shard(folder: Path, tensors: dict[str, torch.Tensor]) -> Path:
    """Write ``tensors`` as the folder's last shard, renumber the shards before it and index them all; return its path.

    The folder holds what ``save_pretrained`` wrote: one ``model.safetensors``, or shards and their index.
    """
    index_path = folder / INDEX_FILE
    if index_path.exists():
        index = json.loads(index_path.read_text())
    else:
        with safe_open(folder / SINGLE_FILE, framework="pt") as single_file:
            index = {"metadata": {}, "weight_map": dict.fromkeys(single_file.keys(), SINGLE_FILE)}
    shards = sorted(set(index["weight_map"].values()))
    count = len(shards) + 1
    renamed = {shard: _shard_name(number, count) for number, shard in enumerate(shards, start=1)}
    for shard, name in renamed.items():
        (folder / shard).rename(folder / name)
    new_shard = folder / _shard_name(count, count)
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()}, new_shard, metadata={"format": "pt"})
    weight_map = {tensor: renamed[shard] for tensor, shard in index["weight_map"].items()}
    weight_map |= dict.fromkeys(tensors, new_shard.name)
    total_size = sum(_tensor_bytes(folder / shard) for shard in (*renamed.values(), new_shard.name))
    index = {"metadata": {**index["metadata"], "total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    index_path.write_text(json.dumps(index, indent=2) + "\n")
    return new_shard
