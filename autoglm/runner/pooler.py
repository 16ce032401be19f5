"""A step's pooling rows reduced on the device: each chunk's share of its prompt's vector (see PoolingChunk),
copied to the host in one transfer."""
from __future__ import annotations

import torch
from torch import nn

from autoglm.step_plan import PoolingChunk


def pool_chunks(model: nn.Module, hidden: torch.Tensor, chunks: list[PoolingChunk]) -> list[torch.Tensor | None]:
    """Each chunk's float32 share on the host, None where it adds nothing (CLS past the first chunk, LAST
    before the last)."""
    shares: list[torch.Tensor | None] = []
    for chunk in chunks:
        rows = hidden[chunk.first_token : chunk.first_token + chunk.num_tokens]
        if chunk.pooling_type == "MEAN":
            shares.append(rows.float().sum(dim=0))
        elif chunk.pooling_type == "CLS" and chunk.starts_prompt:
            shares.append(rows[0].float())
        elif chunk.pooling_type == "LAST" and chunk.ends_prompt:
            shares.append(_head(model, rows[-1:], chunk))
        else:
            shares.append(None)
    present = [share for share in shares if share is not None]
    if not present:
        return shares
    on_host = iter(torch.cat(present).cpu().split([share.numel() for share in present]))
    return [None if share is None else next(on_host) for share in shares]


def _head(model: nn.Module, row: torch.Tensor, chunk: PoolingChunk) -> torch.Tensor:
    """The last row as the chunk's head maps it, flattened."""
    if chunk.head == "hidden":
        return row[0].float()
    logits = model.compute_logits(row)[0]
    if chunk.head == "logits":
        return logits
    no_id, yes_id = chunk.token_pair
    return (logits[yes_id] - logits[no_id]).reshape(1)
