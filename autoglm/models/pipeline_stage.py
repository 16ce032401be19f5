"""What of the decoder one pipeline stage holds: its run of layers, the embedding on the first stage
(and on the last where the LM head reads the embedding's weights), the LM head on the last.

The parts another stage holds are :class:`OnAnotherStage` placeholders, so that layer indices and
checkpoint names stay those of the whole model; their checkpoint tensors are passed over at load.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

from autoglm.distributed.pipeline_state import pipeline_stage, stage_layers
from autoglm.models.model_config import ModelConfig


class OnAnotherStage(nn.Module):
    """Stands in for a module another pipeline stage holds; it has no weights and never runs."""

    def forward(self, *args: object, **kwargs: object) -> torch.Tensor:
        raise RuntimeError("this part of the model is held by another pipeline stage")


@dataclass(frozen=True)
class StageParts:
    layers: range
    first: bool  # embeds the tokens
    last: bool  # ends with the final norm; holds the LM head
    embedding: bool  # holds the embedding: the first stage, and the last where the LM head is tied to it

    @property
    def whole_model(self) -> bool:
        return self.first and self.last


def stage_parts(config: ModelConfig) -> StageParts:
    """This process's parts of ``config``'s decoder (the whole of it outside a pipeline)."""
    stage = pipeline_stage()
    embedding = stage.is_first or (stage.is_last and config.tie_word_embeddings)
    return StageParts(stage_layers(config.num_hidden_layers), stage.is_first, stage.is_last, embedding)


def held_weights(model: nn.Module,
                 weights: Iterable[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
    """The checkpoint tensors of ``model``'s own parts: those under a placeholder are passed over."""
    elsewhere = tuple(f"{name}." for name, module in model.named_modules() if isinstance(module, OnAnotherStage))
    if not elsewhere:
        return iter(weights)
    return ((name, tensor) for name, tensor in weights if not name.startswith(elsewhere))
