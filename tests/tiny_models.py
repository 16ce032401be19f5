"""Tiny random checkpoints of each supported family, built on the fly with transformers.

``make_tiny_checkpoint`` writes a folder that both transformers (``AutoModelForCausalLM``,
``AutoTokenizer``) and the engine can load: weights, config and a small byte-level BPE
tokenizer. Weights are drawn with a larger spread than a real init so that logits are far
from uniform and greedy choices are not near-ties.

The mixture-of-experts families (``MOE_ARCHITECTURES``) build the same way but stay out of
``TINY_ARCHITECTURES``, which the dense families' many tests run over.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    PreTrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

TINY_ARCHITECTURES = ("llama", "qwen2", "qwen3", "glm4")
MOE_ARCHITECTURES = ("glm4_moe", "qwen3_moe")
_CAUSAL_LM_NAMES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "glm4": "Glm4ForCausalLM",
    "glm4_moe": "Glm4MoeForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}

# The eos name is also the default special token of transformers' Qwen2 tokenizer, which
# would otherwise add it as one more entry past the model's vocabulary.
PAD_TOKEN, BOS_TOKEN, EOS_TOKEN = "<|pad|>", "<|bos|>", "<|endoftext|>"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2  # special tokens come first in the trained vocabulary
WEIGHT_STD = 0.15  # spread of matrices and biases; norm weights are drawn around 1

TOKENIZER_TEXT = (
    "The quick brown fox jumps over the lazy dog. A small model reads a short line of text, "
    "then writes the next word, and the next, until it meets the end. Paged attention keeps "
    "each sequence's keys and values in fixed blocks; a scheduler batches every request at "
    "every step. Hello world! Numbers like 0, 1, 2, 3, 42 and 1024 appear too. "
    "To be, or not to be: that is the question. Whether 'tis nobler in the mind to suffer "
    "the slings and arrows of outrageous fortune, or to take arms against a sea of troubles."
)

# The sizes every tiny model shares, whatever its family.
TINY_SHAPE: dict[str, Any] = {
    "vocab_size": 320,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-6,
}

_BASE_CONFIG: dict[str, Any] = {
    **TINY_SHAPE,
    "head_dim": 16,
    "tie_word_embeddings": False,
    "pad_token_id": PAD_ID,
    "bos_token_id": BOS_ID,
    "eos_token_id": EOS_ID,
}

# Three layers, 8 routed experts of which each token takes 2, and at least one dense layer.
_MOE_CONFIGS: dict[str, dict[str, Any]] = {
    "glm4_moe": {  # GLM-4.5-Air's layout, scaled down: grouped routing, a shared expert, the first layer dense
        "num_hidden_layers": 3,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "n_group": 2,
        "topk_group": 1,
        "n_shared_experts": 1,
        "first_k_dense_replace": 1,
        "moe_intermediate_size": 32,
        "routed_scaling_factor": 2.5,
        "norm_topk_prob": True,
        "attention_bias": True,
        "partial_rotary_factor": 0.5,
    },
    "qwen3_moe": {  # Qwen3-30B-A3B's routing, scaled down, with its middle layer dense
        "num_hidden_layers": 3,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [1],
        "norm_topk_prob": True,
    },
}
CORRECTION_BIAS_STD = 0.3  # GLM's e_score_correction_bias: wide enough to change which experts are chosen


def tiny_config(arch: str, **config_overrides: Any) -> PreTrainedConfig:
    """The transformers config of a tiny ``arch`` model: 2 layers (3 for a mixture of experts), 4 heads over
    2 KV heads."""
    if arch not in _CAUSAL_LM_NAMES:
        raise ValueError(
            f"unknown tiny architecture '{arch}'; choose one of: {', '.join(_CAUSAL_LM_NAMES)}"
        )
    settings = {**_BASE_CONFIG, **_MOE_CONFIGS.get(arch, {}), "architectures": [_CAUSAL_LM_NAMES[arch]],
                **config_overrides}
    return AutoConfig.for_model(arch, **settings)


def build_tiny_model(
    arch: str, *, seed: int = 0, dtype: torch.dtype = torch.float32, **config_overrides: Any
) -> PreTrainedModel:
    """A transformers model of family ``arch`` with seeded, well-spread random weights (and a random GLM
    router correction bias, which transformers leaves at zero)."""
    model = AutoModelForCausalLM.from_config(tiny_config(arch, **config_overrides), dtype=torch.float32)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if name.endswith("norm.weight"):
                parameter.copy_(1.0 + 0.1 * noise)
            else:
                parameter.copy_(WEIGHT_STD * noise)
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buffer.copy_(CORRECTION_BIAS_STD * torch.randn(buffer.shape, generator=generator))
    return model.to(dtype).eval()


_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def build_tiny_tokenizer(vocab_size: int, *, add_bos_token: bool = False,
                         extra_tokens: Sequence[AddedToken] = ()) -> PreTrainedTokenizerFast:
    """A byte-level BPE with exactly ``vocab_size`` entries (padded with reserved tokens).

    With ``add_bos_token`` it starts every encoded text with BOS, as Llama's tokenizer does, and
    its chat template writes BOS itself: rendering a chat and then encoding it with special tokens
    would double the BOS, which is what a server must avoid.

    ``extra_tokens`` (a chat format's markers) take the ids right after the trained vocabulary, before
    the reserved padding, so the size stays ``vocab_size``; those marked special are skipped in decoding,
    the others survive it, as in a real model's tokenizer.
    """
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(extra_tokens),
        special_tokens=[PAD_TOKEN, BOS_TOKEN, EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([TOKENIZER_TEXT], trainer)
    tokenizer.add_tokens(list(extra_tokens))
    if tokenizer.get_vocab_size() > vocab_size:
        raise ValueError(f"vocab_size {vocab_size} is too small for the 256 bytes, 3 special tokens and "
                         f"{len(extra_tokens)} extra tokens")
    reserved = [f"<|reserved_{i}|>" for i in range(vocab_size - tokenizer.get_vocab_size())]
    tokenizer.add_special_tokens(reserved)
    if add_bos_token:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{BOS_TOKEN} $A", pair=f"{BOS_TOKEN} $A $B", special_tokens=[(BOS_TOKEN, BOS_ID)]
        )
    special = [token.content for token in extra_tokens if token.special]
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token=PAD_TOKEN, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN,
        **({"extra_special_tokens": special} if special else {}),
    )
    wrapped.chat_template = ("{{ bos_token }}" if add_bos_token else "") + _CHAT_TEMPLATE
    return wrapped


def make_tiny_checkpoint(
    arch: str,
    path: str | Path,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    max_shard_size: str | int | None = None,
    add_bos_token: bool = False,
    extra_tokens: Sequence[AddedToken] = (),
    **config_overrides: Any,
) -> Path:
    """Save a tiny ``arch`` model and its tokenizer to ``path``; returns the folder.

    ``config_overrides`` replace entries of the transformers config (e.g. ``rope_scaling``,
    ``tie_word_embeddings``); ``max_shard_size`` splits the weights into several files;
    ``add_bos_token`` gives the tokenizer a BOS on every encoded text; ``extra_tokens`` adds tokens to its
    vocabulary (see :func:`build_tiny_tokenizer`).
    """
    folder = Path(path)
    model = build_tiny_model(arch, seed=seed, dtype=dtype, **config_overrides)
    shard_arguments = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    model.save_pretrained(folder, **shard_arguments)
    build_tiny_tokenizer(model.config.vocab_size, add_bos_token=add_bos_token,
                         extra_tokens=extra_tokens).save_pretrained(folder)
    return folder
