"""What the vision encoders' tests share: a tiny random vision-language checkpoint, encoders
loaded from it, random patches, and transformers' own vision tower to compare with."""
from __future__ import annotations

from pathlib import Path
import torch
from torch import nn
from transformers import PreTrainedModel

from autoglm.models.linear_method import LinearMethodBase, process_weights_after_loading
from autoglm.models.loader import iter_checkpoint_tensors, safetensors_files

WEIGHT_STD = 0.15  # a wider spread than a real init, so that outputs are far from zero
NORM_NAMES = ("norm", "ln_q")
DECODER_HIDDEN = 32
TEXT_CONFIG = {
    "vocab_size": 64,
    "hidden_size": DECODER_HIDDEN,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}
PATCH_FEATURES = 3 * 2 * 14 * 14
PARITY_TOLERANCE = 1e-4
INT8_TOLERANCE = 0.05  # relative to the largest output magnitude
# Inputs every encoder refuses (merge size 2): grid_thw, the number of patches given, the error.
BAD_INPUTS = [
    ([[1, 4, 6]], 23, "pixel_values must be"),
    ([[1, 3, 4]], 12, "multiples of the merge size 2"),
    ([[1, 4]], 4, r"grid_thw must be \[num_images, 3\]"),
    ([[0, 4, 4]], 0, "must be positive"),
]


def save_randomised(model: PreTrainedModel, folder: Path) -> None:
    """Fill ``model`` with seeded random weights (norm scales near one) and save it to ``folder``."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            is_norm = any(part in name for part in NORM_NAMES) and name.endswith("weight")
            parameter.copy_(1.0 + 0.1 * noise if is_norm else WEIGHT_STD * noise)
    model.save_pretrained(folder)


def load_encoder(encoder_class: type[nn.Module], config, folder: Path,
                 linear_method: LinearMethodBase | None = None) -> nn.Module:
    """An encoder of ``config`` filled from the checkpoint in ``folder``, ready to run."""
    encoder = encoder_class(config, linear_method)
    encoder.load_weights(iter_checkpoint_tensors(safetensors_files(folder)))
    process_weights_after_loading(encoder)
    return encoder.eval()


def pixels(grid: list[list[int]], seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Random flattened patches for ``grid`` and the ``grid_thw`` tensor describing them."""
    grid_thw = torch.tensor(grid)
    num_patches = int(grid_thw.prod(-1).sum())
    return torch.randn(num_patches, PATCH_FEATURES, generator=torch.Generator().manual_seed(seed)), grid_thw


def reference(model: PreTrainedModel, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
    """The merged embeddings of transformers' own vision tower."""
    with torch.no_grad():
        return model.model.visual(pixel_values, grid_thw=grid_thw).pooler_output


def quantized_linears(encoder: nn.Module) -> list[str]:
    """The names of the encoder's linears whose weights a quantized method holds."""
    return [name for name, module in encoder.named_modules() if hasattr(module, "qweight")]
