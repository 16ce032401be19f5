"""The models a pooling engine runs: a decoder family's base model as an embedding model (its final normed
hidden states, no LM head), and its sequence classifier (a ``score`` head on the hidden state).

Both keep the decoder's module names, so a checkpoint loads as the causal LM's does; an embedding
checkpoint saved without the ``model.`` prefix (sentence-transformers' layout) loads too.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache

import torch
from torch import nn

from autoglm.models.decoder import DecoderForCausalLM, DecoderModel, DecoderSpec
from autoglm.models.linear_method import LinearMethods
from autoglm.models.llama import llama_spec
from autoglm.models.model_config import ModelConfig
from autoglm.models.partition import current_partition
from autoglm.models.pipeline_stage import OnAnotherStage, held_weights
from autoglm.models.qwen2 import QWEN2_SPEC
from autoglm.models.qwen3 import qwen3_spec
from autoglm.models.registry import SUPPORTED_ARCHITECTURES, model_class_for
from autoglm.models.weight_loading import load_checkpoint_weights


class DecoderForSequenceClassification(nn.Module):
    """A decoder and a bias-free ``score`` head of ``num_labels`` outputs, read at the pooled position."""

    def __init__(self, config: ModelConfig, spec: DecoderSpec, linear_methods: LinearMethods) -> None:
        super().__init__()
        self.config = config
        self.model = DecoderModel(config, spec, linear_methods, current_partition(config))
        self.score = (nn.Linear(config.hidden_size, config.num_labels, bias=False) if self.model.parts.last
                      else OnAnotherStage())

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids, positions)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 class logits ``[N, num_labels]`` of the pooled rows of ``hidden``."""
        return self.score(hidden).float()

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """This stage's tensors (every tensor outside a pipeline)."""
        load_checkpoint_weights(self, held_weights(self, weights))


def _classifier(spec: Callable[[ModelConfig], DecoderSpec]) -> Callable[[ModelConfig, LinearMethods], nn.Module]:
    return lambda config, linear_methods: DecoderForSequenceClassification(config, spec(config), linear_methods)


SEQUENCE_CLASSIFIERS: dict[str, Callable[[ModelConfig, LinearMethods], nn.Module]] = {
    "LlamaForSequenceClassification": _classifier(llama_spec),
    "Qwen2ForSequenceClassification": _classifier(lambda config: QWEN2_SPEC),
    "Qwen3ForSequenceClassification": _classifier(qwen3_spec),
}


class _EmbeddingHead:
    """Mixed into a causal LM class: drops the LM head, whose weights an embedding checkpoint may lack."""

    def __init__(self, config: ModelConfig, linear_methods: LinearMethods) -> None:
        super().__init__(config, linear_methods)
        self.lm_head = None

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """No LM head: a profile run's rows are the hidden states themselves, the widest array a pooling step makes."""
        return hidden.float()

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """The base model's tensors of this stage, with or without the ``model.`` prefix; an LM head's are passed
        over."""
        named = ((_base_model_name(name), tensor) for name, tensor in weights if not name.startswith("lm_head."))
        load_checkpoint_weights(self, held_weights(self, named))


def _base_model_name(name: str) -> str:
    return name if name.startswith("model.") else f"model.{name}"


@cache
def _embedding_class(causal: type[DecoderForCausalLM]) -> type[nn.Module]:
    return type(causal.__name__.replace("ForCausalLM", "ForEmbedding"), (_EmbeddingHead, causal), {})


def pooling_model_class(architecture: str, reads_lm_head: bool) -> Callable[[ModelConfig, LinearMethods], nn.Module]:
    """What a pooling engine builds for ``architecture``: its sequence classifier, or its causal LM as an
    embedding model; with its LM head where ``reads_lm_head`` (a yes/no reranker scores with it)."""
    if architecture in SEQUENCE_CLASSIFIERS:
        return SEQUENCE_CLASSIFIERS[architecture]
    try:
        causal = model_class_for(causal_architecture(architecture))
    except ValueError:
        supported = ", ".join([*SEQUENCE_CLASSIFIERS, *(f"{name} (or its base *Model)" for name in SUPPORTED_ARCHITECTURES)])
        raise ValueError(f"no pooling model for architecture '{architecture}'; supported: {supported}") from None
    return causal if reads_lm_head else _embedding_class(causal)


def causal_architecture(architecture: str) -> str:
    """The causal LM a base-model architecture (``Qwen3Model``, as some embedding checkpoints name theirs) belongs to."""
    return architecture.removesuffix("Model") + "ForCausalLM" if architecture.endswith("Model") else architecture


def is_base_model_architecture(architecture: str) -> bool:
    """Whether ``architecture`` names a family's base model (an embedding checkpoint), not its causal LM."""
    return architecture.endswith("Model") and causal_architecture(architecture) in SUPPORTED_ARCHITECTURES
