"""The mixture-of-experts shapes: Qwen3-30B-A3B, and Qwen3-MoE's and GLM-4.5-Air's layouts at test sizes.

``qwen3-30b-a3b`` holds the published ``config.json`` values of Qwen/Qwen3-30B-A3B: 48 layers, each with 128 experts
of which 8 serve a token, 30.5B parameters of which 3.3B are active; whole, it is about 61 GB in bfloat16, so
``--layers`` writes a few of its real layers. The ``-tiny`` shapes keep each architecture's layout at sizes tests
build in about a second, with every token id inside their vocabulary, and attention twice (Qwen3) or three times
(GLM) as wide as the hidden size, as in the published models. ``glm4.5-air-tiny`` takes GLM-4.5-Air's published values
but for its sizes and its expert groups: two groups, of which each token's experts come from one, so that the grouped
top-k has groups to choose between.
"""
from __future__ import annotations

from autoglm.bench.make_model.model_shape import ModelShape
from autoglm.bench.make_model.tokenizer import EOS_TOKEN, TINY_VOCAB_SIZE

# GLM's role tags, as the bench tokenizer's special tokens: the role-tagged chat template writes them, and GLM ends
# a turn on the next one's tag as on its end token.
GLM_ROLE_MARKERS = ("<|system|>", "<|user|>", "<|assistant|>", "<|observation|>")

MOE_SHAPES: dict[str, ModelShape] = {
    "qwen3-30b-a3b": ModelShape(
        model_type="qwen3_moe",
        architecture="Qwen3MoeForCausalLM",
        config={
            "vocab_size": 151936,
            "hidden_size": 2048,
            "intermediate_size": 6144,
            "moe_intermediate_size": 768,
            "num_hidden_layers": 48,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "norm_topk_prob": True,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "max_position_embeddings": 40960,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "attention_bias": False,
            "hidden_act": "silu",
            "router_aux_loss_coef": 0.001,
            "use_sliding_window": False,
            "max_window_layers": 48,
            "tie_word_embeddings": False,
            "bos_token_id": 151643,
            "eos_token_id": 151645,
        },
    ),
    "qwen3-moe-tiny": ModelShape(
        model_type="qwen3_moe",
        architecture="Qwen3MoeForCausalLM",
        config={
            "vocab_size": TINY_VOCAB_SIZE,
            "hidden_size": 64,
            "intermediate_size": 128,
            "moe_intermediate_size": 32,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "norm_topk_prob": True,
            "decoder_sparse_step": 1,
            "mlp_only_layers": [1],  # a dense layer between experts' layers: a set of layers, not a leading run
            "max_position_embeddings": 2048,
            "rms_norm_eps": 1e-6,
            "rope_theta": 1000000.0,
            "attention_bias": False,
            "use_sliding_window": False,
            "tie_word_embeddings": False,
        },
        token_id_fields={"bos_token_id": EOS_TOKEN, "eos_token_id": EOS_TOKEN},
    ),
    "glm4.5-air-tiny": ModelShape(
        model_type="glm4_moe",
        architecture="Glm4MoeForCausalLM",
        config={
            "vocab_size": TINY_VOCAB_SIZE,
            "hidden_size": 64,
            "intermediate_size": 128,
            "moe_intermediate_size": 32,
            "num_hidden_layers": 3,
            "num_attention_heads": 6,
            "num_key_value_heads": 2,
            "head_dim": 32,
            "n_routed_experts": 8,
            "n_shared_experts": 1,
            "num_experts_per_tok": 2,
            "n_group": 2,
            "topk_group": 1,
            "first_k_dense_replace": 1,
            "norm_topk_prob": True,
            "routed_scaling_factor": 1.0,
            "num_nextn_predict_layers": 1,
            "max_position_embeddings": 2048,
            "rms_norm_eps": 1e-5,
            "rope_theta": 1000000.0,
            "partial_rotary_factor": 0.5,
            "attention_bias": True,
            "use_qk_norm": False,
            "hidden_act": "silu",
            "tie_word_embeddings": False,
        },
        special_tokens=GLM_ROLE_MARKERS,
        token_id_fields={"pad_token_id": EOS_TOKEN, "eos_token_id": (EOS_TOKEN, "<|user|>", "<|observation|>")},
    ),
}
