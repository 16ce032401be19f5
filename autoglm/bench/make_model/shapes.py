"""The architectures of real published models, so benchmarks run at the sizes users serve.

Each entry holds the ``config.json`` values of the published checkpoint, in the hub's
spelling (``rope_theta``, ``rope_scaling``, ``partial_rotary_factor``); only the weights are
random. ``glm-4-9b`` is glm-4-9b-chat-hf's shape under the ``Glm4ForCausalLM`` architecture
the engine serves. The vision-language shapes are in ``vision_language_shapes``, the
mixture-of-experts ones in ``moe_shapes``.
"""
from __future__ import annotations

from autoglm.bench.make_model.model_shape import ModelShape
from autoglm.bench.make_model.moe_shapes import MOE_SHAPES
from autoglm.bench.make_model.vision_language_shapes import VISION_LANGUAGE_SHAPES

MODEL_SHAPES: dict[str, ModelShape] = {
    "qwen2.5-0.5b": ModelShape(
        model_type="qwen2",
        architecture="Qwen2ForCausalLM",
        config={
            "vocab_size": 151936,
            "hidden_size": 896,
            "intermediate_size": 4864,
            "num_hidden_layers": 24,
            "num_attention_heads": 14,
            "num_key_value_heads": 2,
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "tie_word_embeddings": True,
            "use_sliding_window": False,
            "max_window_layers": 21,
            "bos_token_id": 151643,
            "eos_token_id": 151645,
        },
    ),
    "qwen3-embedding-0.6b": ModelShape(  # Qwen3-Embedding-0.6B: Qwen3-0.6B's decoder, read by last-token pooling
        model_type="qwen3",
        architecture="Qwen3ForCausalLM",
        config={
            "vocab_size": 151669,
            "hidden_size": 1024,
            "intermediate_size": 3072,
            "num_hidden_layers": 28,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "tie_word_embeddings": True,
            "bos_token_id": 151643,
            "eos_token_id": 151643,
        },
    ),
    "llama-3.2-1b": ModelShape(
        model_type="llama",
        architecture="LlamaForCausalLM",
        config={
            "vocab_size": 128256,
            "hidden_size": 2048,
            "intermediate_size": 8192,
            "num_hidden_layers": 16,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "max_position_embeddings": 131072,
            "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "rope_type": "llama3",
                "factor": 32.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
            "tie_word_embeddings": True,
            "attention_bias": False,
            "mlp_bias": False,
            "bos_token_id": 128000,
            "eos_token_id": [128001, 128008, 128009],
        },
    ),
    "glm-4-9b": ModelShape(
        model_type="glm4",
        architecture="Glm4ForCausalLM",
        config={
            "vocab_size": 151552,
            "hidden_size": 4096,
            "intermediate_size": 13696,
            "num_hidden_layers": 40,
            "num_attention_heads": 32,
            "num_key_value_heads": 2,
            "head_dim": 128,
            "max_position_embeddings": 131072,
            "rms_norm_eps": 1.5625e-7,
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.5,
            "attention_bias": True,
            "tie_word_embeddings": False,
            "pad_token_id": 151329,
            "eos_token_id": [151329, 151336, 151338],
        },
    ),
    **VISION_LANGUAGE_SHAPES,
    **MOE_SHAPES,
}
