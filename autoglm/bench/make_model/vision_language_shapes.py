"""The vision-language shapes: GLM-4.1V (AutoGLM-Phone-9B's architecture) and Qwen2.5-VL.

``autoglm-phone-9b`` holds the published ``config.json`` values of AutoGLM-Phone-9B, which are those of
GLM-4.1V-9B-Thinking; its image and video token ids are moved to where the small benchmark tokenizer
holds those markers. The ``-tiny`` shapes keep each architecture's layout at sizes tests build in about a
second, with every token id inside their vocabulary.
"""
from __future__ import annotations

from typing import Any

from autoglm.bench.make_model.chat_templates import GLM4V_CHAT_TEMPLATE, QWEN2_5_VL_CHAT_TEMPLATE
from autoglm.bench.make_model.model_shape import ModelShape
from autoglm.bench.make_model.tokenizer import EOS_TOKEN, TINY_VOCAB_SIZE

# The CLIP normalisation both models' image processors use.
CLIP_IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_IMAGE_STD = [0.26862954, 0.26130258, 0.27577711]

GLM4V_MARKERS = ("<|system|>", "<|user|>", "<|assistant|>", "<|begin_of_image|>", "<|end_of_image|>",
                 "<|begin_of_video|>", "<|end_of_video|>", "<|image|>", "<|video|>")
GLM4V_MARKER_FIELDS = {
    "image_token_id": "<|image|>",
    "video_token_id": "<|video|>",
    "image_start_token_id": "<|begin_of_image|>",
    "image_end_token_id": "<|end_of_image|>",
    "video_start_token_id": "<|begin_of_video|>",
    "video_end_token_id": "<|end_of_video|>",
}
GLM4V_IMAGE_PROCESSOR: dict[str, Any] = {
    "image_processor_type": "Glm4vImageProcessor",
    "processor_class": "Glm4vProcessor",
    "size": {"shortest_edge": 12544, "longest_edge": 9633792},
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": CLIP_IMAGE_MEAN,
    "image_std": CLIP_IMAGE_STD,
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "do_convert_rgb": True,
}

QWEN2_5_VL_MARKERS = ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
                      "<|video_pad|>")
QWEN2_5_VL_IMAGE_PROCESSOR: dict[str, Any] = {
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen2_5_VLProcessor",
    "min_pixels": 3136,
    "max_pixels": 12845056,
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": CLIP_IMAGE_MEAN,
    "image_std": CLIP_IMAGE_STD,
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "do_convert_rgb": True,
}

VISION_LANGUAGE_SHAPES: dict[str, ModelShape] = {
    "autoglm-phone-9b": ModelShape(
        model_type="glm4v",
        architecture="Glm4vForConditionalGeneration",
        config={
            "text_config": {
                "vocab_size": 151552,
                "hidden_size": 4096,
                "intermediate_size": 13696,
                "num_hidden_layers": 40,
                "num_attention_heads": 32,
                "num_key_value_heads": 2,
                "max_position_embeddings": 65536,
                "rms_norm_eps": 1e-5,
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
                "rope_scaling": {"type": "default", "mrope_section": [8, 12, 12]},
                "attention_bias": True,
                "hidden_act": "silu",
                "pad_token_id": 151329,
                "eos_token_id": [151329, 151336, 151338],
            },
            "vision_config": {
                "depth": 24,
                "hidden_size": 1536,
                "num_heads": 12,
                "intermediate_size": 13696,
                "out_hidden_size": 4096,
                "image_size": 336,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "rms_norm_eps": 1e-5,
                "attention_bias": False,
                "hidden_act": "silu",
            },
            "tie_word_embeddings": False,
        },
        layers_key="text_config.num_hidden_layers",
        special_tokens=GLM4V_MARKERS,
        token_id_fields=GLM4V_MARKER_FIELDS,
        chat_template=GLM4V_CHAT_TEMPLATE,
        image_processor=GLM4V_IMAGE_PROCESSOR,
    ),
    "glm4v-tiny": ModelShape(
        model_type="glm4v",
        architecture="Glm4vForConditionalGeneration",
        config={
            "text_config": {
                "vocab_size": TINY_VOCAB_SIZE,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "max_position_embeddings": 2048,
                "rms_norm_eps": 1e-5,
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.5,
                "rope_scaling": {"type": "default", "mrope_section": [2, 3, 3]},  # 8 of head_dim 32's 16 pairs
                "attention_bias": True,
            },
            "vision_config": {
                "depth": 2,
                "hidden_size": 32,
                "num_heads": 2,
                "intermediate_size": 64,
                "out_hidden_size": 64,
                "image_size": 56,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
            },
            "tie_word_embeddings": False,
        },
        layers_key="text_config.num_hidden_layers",
        special_tokens=GLM4V_MARKERS,
        token_id_fields={
            **GLM4V_MARKER_FIELDS,
            "text_config.pad_token_id": EOS_TOKEN,
            "text_config.eos_token_id": (EOS_TOKEN, "<|user|>"),
        },
        chat_template=GLM4V_CHAT_TEMPLATE,
        image_processor=GLM4V_IMAGE_PROCESSOR,
    ),
    "qwen2.5-vl-tiny": ModelShape(
        model_type="qwen2_5_vl",
        architecture="Qwen2_5_VLForConditionalGeneration",
        config={
            "text_config": {
                "vocab_size": TINY_VOCAB_SIZE,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "max_position_embeddings": 2048,
                "rms_norm_eps": 1e-6,
                "rope_theta": 1000000.0,
                "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},  # head_dim 16's 8 pairs
                "use_sliding_window": False,
            },
            "vision_config": {
                "depth": 2,
                "hidden_size": 32,
                "num_heads": 2,
                "intermediate_size": 64,
                "out_hidden_size": 64,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "window_size": 112,
                "fullatt_block_indexes": [1],
                "tokens_per_second": 2,
            },
            "tie_word_embeddings": False,
        },
        layers_key="text_config.num_hidden_layers",
        special_tokens=QWEN2_5_VL_MARKERS,
        token_id_fields={
            "image_token_id": "<|image_pad|>",
            "video_token_id": "<|video_pad|>",
            "vision_start_token_id": "<|vision_start|>",
            "vision_end_token_id": "<|vision_end|>",
            "text_config.bos_token_id": EOS_TOKEN,
            "text_config.pad_token_id": EOS_TOKEN,
            "text_config.eos_token_id": "<|im_end|>",
        },
        chat_template=QWEN2_5_VL_CHAT_TEMPLATE,
        image_processor=QWEN2_5_VL_IMAGE_PROCESSOR,
    ),
}
