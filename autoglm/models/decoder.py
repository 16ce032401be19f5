"""The one decoder-only transformer that every supported family is an instance of.

Families differ only in a :class:`DecoderSpec`: which projections carry a bias, whether
q/k get a per-head norm, whether each sublayer's output is normed again before the residual
add ("sandwich" norms), and the rotary layout. A mixture-of-experts family (``config.moe``) also
swaps the dense MLP of its sparse layers for a :class:`SparseMoeBlock`. Module and parameter names
follow the Hugging Face checkpoints (``model.layers.N.self_attn...``, ``lm_head``) so that loading
maps names one to one, except for the fused projections and experts. How the projections and experts
store and multiply their weights is the :class:`LinearMethods` the model is built with.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from autoglm.distributed.pipeline_state import receive_activations, send_activations
from autoglm.models.expert_method import ExpertMethod
from autoglm.models.layers import GatedMLP, RMSNorm, SelfAttention
from autoglm.models.linear_method import LinearMethodBase, LinearMethods
from autoglm.models.lora import LoRASlots
from autoglm.models.model_config import ModelConfig
from autoglm.models.native_decode import NativeDecodeStep
from autoglm.models.parallel_vocab import lm_head, vocab_embedding
from autoglm.models.partition import ModelPartition, current_partition
from autoglm.models.pipeline_stage import OnAnotherStage, held_weights, stage_parts
from autoglm.models.rotary import RotaryAngles, RotaryEmbedding
from autoglm.models.sparse_moe_block import SparseMoeBlock
from autoglm.models.weight_loading import load_checkpoint_weights


@dataclass(frozen=True)
class DecoderSpec:
    """What one family changes in the shared decoder."""

    qkv_bias: bool
    output_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    sandwich_norms: bool = False
    interleaved_rotary: bool = False


class DecoderLayer(nn.Module):
    """Pre-norm attention then pre-norm MLP, each added to the residual stream.

    The stream is carried as two tensors, ``hidden + residual``, and each add happens inside the
    norm that follows it (``RMSNorm.add_and_norm``), so that it fuses with that norm.
    """

    def __init__(self, config: ModelConfig, spec: DecoderSpec, layer_index: int, linear_method: LinearMethodBase,
                 expert_method: ExpertMethod, partition: ModelPartition) -> None:
        super().__init__()
        eps = config.rms_norm_eps
        self.self_attn = SelfAttention(config, spec.qkv_bias, spec.output_bias, spec.qk_norm, linear_method,
                                       partition)
        self.mlp: nn.Module = (
            SparseMoeBlock(config, config.moe, linear_method, expert_method, partition)
            if config.moe is not None and config.moe.is_sparse(layer_index)
            else GatedMLP(config, spec.mlp_bias, linear_method, partition.intermediate)
        )
        self.input_layernorm = RMSNorm(config.hidden_size, eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps)
        self.post_self_attn_layernorm: nn.Module = (
            RMSNorm(config.hidden_size, eps) if spec.sandwich_norms else nn.Identity()
        )
        self.post_mlp_layernorm: nn.Module = (
            RMSNorm(config.hidden_size, eps) if spec.sandwich_norms else nn.Identity()
        )

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor | None,
                angles: RotaryAngles) -> tuple[torch.Tensor, torch.Tensor]:
        """The stream ``hidden + residual`` (``residual`` None: ``hidden`` alone) in and out, as two parts."""
        normed, residual = self.input_layernorm.add_and_norm(hidden, residual)
        attended = self.post_self_attn_layernorm(self.self_attn(normed, angles))
        normed, residual = self.post_attention_layernorm.add_and_norm(attended, residual)
        return self.post_mlp_layernorm(self.mlp(normed)), residual


class DecoderModel(nn.Module):
    """Embedding, the layer stack and the final norm; the checkpoint's ``model.`` prefix.

    A pipeline stage holds its own layers only (see ``pipeline_stage``): a stage after the first reads its
    input stream from the stage before, and one before the last hands its output stream on.
    """

    def __init__(self, config: ModelConfig, spec: DecoderSpec, linear_methods: LinearMethods,
                 partition: ModelPartition) -> None:
        super().__init__()
        self.parts = stage_parts(config)
        self.hidden_size = config.hidden_size
        self.dtype = torch.get_default_dtype()  # the loader builds the model in its compute dtype
        self.embed_tokens = (vocab_embedding(partition.vocab, config.hidden_size) if self.parts.embedding
                             else OnAnotherStage())
        self.rotary_emb = RotaryEmbedding(config, interleaved=spec.interleaved_rotary)
        self.layers = nn.ModuleList(
            DecoderLayer(config, spec, index, linear_methods.layers, linear_methods.experts, partition)
            if index in self.parts.layers else OnAnotherStage()
            for index in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps) if self.parts.last else OnAnotherStage()

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                input_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """``input_embeds``: the tokens' input embeddings where a caller made them (a vision-language model
        puts image rows among them); else looked up from ``input_ids``."""
        residual = None
        if not self.parts.first:
            hidden, residual = receive_activations(input_ids.shape[0], self.hidden_size, self.dtype, input_ids.device)
        else:
            hidden = self.embed_tokens(input_ids) if input_embeds is None else input_embeds
        angles = self.rotary_emb(positions, hidden.dtype)  # shared by every layer
        for index in self.parts.layers:
            hidden, residual = self.layers[index](hidden, residual, angles)
        if not self.parts.last:
            send_activations(hidden, residual)
            return hidden  # no stage reads it here: only the last stage's hidden states reach the LM head
        return self.norm.add_and_norm(hidden, residual)[0]


class DecoderForCausalLM(nn.Module):
    """A decoder with its LM head, over a flattened batch: ``[T]`` ids in, ``[T, hidden]`` out.

    Built as this process's shard where it is one rank of a tensor-parallel group (see ``partition``).
    """

    def __init__(self, config: ModelConfig, spec: DecoderSpec, linear_methods: LinearMethods) -> None:
        super().__init__()
        self.config = config
        partition = current_partition(config)
        self.model = DecoderModel(config, spec, linear_methods, partition)
        tied_weight = self.model.embed_tokens.weight if config.tie_word_embeddings else None
        self.lm_head = (lm_head(config.hidden_size, partition.vocab, linear_methods.lm_head, tied_weight)
                        if self.model.parts.last else OnAnotherStage())
        self.native_decode: NativeDecodeStep | None = None  # see enable_native_decode
        self.lora: LoRASlots | None = None  # adapter slots, where LoRA is enabled (see models.lora.enable_lora)

    def enable_native_decode(self, max_rows: int) -> None:
        """Let decode steps of up to ``max_rows`` sequences run as one native call where the kernels allow; never
        for a mixture-of-experts model, whose experts the native step (dense MLPs only) cannot run, nor for a
        pipeline stage, whose step is part of the stack."""
        native = max_rows > 0 and self.config.moe is None and self.model.parts.whole_model
        self.native_decode = NativeDecodeStep(self, max_rows) if native else None

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Hidden states ``[T, hidden]`` for all sequences of a step concatenated, no padding."""
        if input_ids.dim() != 1 or positions.shape != input_ids.shape:
            raise ValueError(
                "input_ids and positions must both be 1-D [num_tokens] tensors of the same length, got "
                f"{tuple(input_ids.shape)} and {tuple(positions.shape)}"
            )
        adapters = self.lora is not None and self.lora.step.has_adapters  # the native step knows no adapters
        native = self.native_decode if not adapters else None
        hidden = native(input_ids, positions) if native is not None else None
        return hidden if hidden is not None else self.model(input_ids, positions)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Float32 logits ``[N, vocab]`` for the rows of ``hidden`` that need sampling."""
        return self.lm_head(hidden).float()

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Fill every parameter from Hugging Face-named tensors (split q/k/v and gate/up allowed)."""
        ignored = frozenset({"lm_head.weight"}) if self.config.tie_word_embeddings else frozenset()
        load_checkpoint_weights(self, held_weights(self, weights), ignored)
