"""The vocabulary split over tensor-parallel ranks: embedding and LM head, and the factories that pick them.

Each rank keeps the rows of one slice of the vocabulary (padded where it does not divide): an all-reduce
assembles the embedded tokens, an all-gather the logits, which every rank then holds whole. On one rank
the factories return the plain layers.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from autoglm.distributed.parallel_state import all_gather_last_dim, all_reduce
from autoglm.models.layers import Embedding
from autoglm.models.linear import LMHead
from autoglm.models.linear_method import LinearMethodBase
from autoglm.models.shard import OutputSharding, Shard, shard_parameters


class VocabParallelEmbedding(Embedding):
    """The rows of this rank's slice of the vocabulary; other ranks embed the other tokens."""

    def __init__(self, vocab: Shard, hidden_size: int) -> None:
        super().__init__(vocab.size, hidden_size)
        shard_parameters(self, OutputSharding((vocab,)))
        self.first_token_id = vocab.start

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        local_ids = input_ids - self.first_token_id
        elsewhere = (local_ids < 0) | (local_ids >= self.weight.shape[0])
        rows = F.embedding(local_ids.masked_fill(elsewhere, 0), self.weight)
        return all_reduce(rows.masked_fill_(elsewhere.unsqueeze(-1), 0))


class ParallelLMHead(LMHead):
    """The logits of this rank's slice of the vocabulary, gathered into the whole vocabulary on every rank."""

    def __init__(self, hidden_size: int, vocab: Shard, linear_method: LinearMethodBase,
                 tied_weight: nn.Parameter | None = None) -> None:
        super().__init__(hidden_size, vocab.size, linear_method, tied_weight)
        if tied_weight is None:  # a tied weight is the embedding's, sharded already
            shard_parameters(self, OutputSharding((vocab,)))
        self.vocab_size = vocab.extent

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = all_gather_last_dim(super().forward(hidden))
        return logits if logits.shape[-1] == self.vocab_size else logits[..., : self.vocab_size]


def vocab_embedding(vocab: Shard, hidden_size: int) -> Embedding:
    return Embedding(vocab.extent, hidden_size) if vocab.count == 1 else VocabParallelEmbedding(vocab, hidden_size)


def lm_head(hidden_size: int, vocab: Shard, linear_method: LinearMethodBase,
            tied_weight: nn.Parameter | None = None) -> LMHead:
    if vocab.count == 1:
        return LMHead(hidden_size, vocab.extent, linear_method, tied_weight)
    return ParallelLMHead(hidden_size, vocab, linear_method, tied_weight)
