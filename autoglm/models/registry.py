"""Which model class serves each checkpoint architecture name."""
from __future__ import annotations

from autoglm.models.decoder import DecoderForCausalLM
from autoglm.models.glm4 import Glm4ForCausalLM
from autoglm.models.glm4_moe import Glm4MoeForCausalLM
from autoglm.models.glm4v import Glm4vForConditionalGeneration
from autoglm.models.llama import LlamaForCausalLM
from autoglm.models.qwen2 import Qwen2ForCausalLM
from autoglm.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration
from autoglm.models.qwen3 import Qwen3ForCausalLM
from autoglm.models.qwen3_moe import Qwen3MoeForCausalLM

_MODEL_CLASSES: dict[str, type[DecoderForCausalLM]] = {
    "Glm4ForCausalLM": Glm4ForCausalLM,
    "Glm4MoeForCausalLM": Glm4MoeForCausalLM,
    "Glm4vForConditionalGeneration": Glm4vForConditionalGeneration,
    "LlamaForCausalLM": LlamaForCausalLM,
    "Qwen2ForCausalLM": Qwen2ForCausalLM,
    "Qwen2_5_VLForConditionalGeneration": Qwen2_5_VLForConditionalGeneration,
    "Qwen3ForCausalLM": Qwen3ForCausalLM,
    "Qwen3MoeForCausalLM": Qwen3MoeForCausalLM,
}
SUPPORTED_ARCHITECTURES = tuple(_MODEL_CLASSES)


def model_class_for(architecture: str) -> type[DecoderForCausalLM]:
    """The class for a config's ``architectures[0]``; unknown names list the supported ones."""
    model_class = _MODEL_CLASSES.get(architecture)
    if model_class is None:
        supported = ", ".join(SUPPORTED_ARCHITECTURES)
        raise ValueError(f"unsupported model architecture '{architecture}'; supported: {supported}")
    return model_class
