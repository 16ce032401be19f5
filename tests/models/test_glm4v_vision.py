"""The GLM-4.1V vision encoder against transformers' own vision tower, loaded from a tiny random
checkpoint of the full conditional-generation model (so its tensor names are the real ones)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import Glm4vConfig, Glm4vForConditionalGeneration

from autoglm.models.glm4v_vision import Glm4vVisionModel
from autoglm.models.glm4v_vision_config import Glm4vVisionConfig
from autoglm.models.linear_method import process_weights_after_loading
from autoglm.models.linear_method.int_weights import IntWeightFormat
from autoglm.models.linear_method.quantize_at_load import QuantizeAtLoadLinearMethod
from autoglm.models.loader import iter_checkpoint_tensors, safetensors_files

pytestmark = pytest.mark.timeout(120)

WEIGHT_STD = 0.15  # a wider spread than a real init, so that outputs are far from zero
DECODER_HIDDEN = 32
VISION_CONFIG = {
    "depth": 2,
    "hidden_size": 64,
    "num_heads": 4,
    "image_size": 112,  # an 8 x 8 grid of learned positions, resampled to each image's grid
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": DECODER_HIDDEN,
    "intermediate_size": 48,
    "attention_bias": True,
}
TEXT_CONFIG = {
    "vocab_size": 64,
    "hidden_size": DECODER_HIDDEN,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
}
TWO_IMAGES = [[1, 4, 6], [1, 8, 4]]  # patches: frames, rows, columns; different sizes and aspect ratios
PATCH_FEATURES = 3 * 2 * 14 * 14
PARITY_TOLERANCE = 1e-4
INT8_TOLERANCE = 0.05  # relative to the largest output magnitude


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Glm4vForConditionalGeneration]:
    """A saved tiny random GLM-4.1V and the transformers model it was saved from."""
    config = Glm4vConfig(text_config=TEXT_CONFIG, vision_config=VISION_CONFIG)
    model = Glm4vForConditionalGeneration(config).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1.0 + 0.1 * noise if "norm" in name and name.endswith("weight") else WEIGHT_STD * noise)
    folder = tmp_path_factory.mktemp("glm4v")
    model.save_pretrained(folder)
    return folder, model


def load_encoder(folder: Path, linear_method: QuantizeAtLoadLinearMethod | None = None) -> Glm4vVisionModel:
    encoder = Glm4vVisionModel(Glm4vVisionConfig.from_pretrained(folder), linear_method)
    encoder.load_weights(iter_checkpoint_tensors(safetensors_files(folder)))
    process_weights_after_loading(encoder)
    return encoder.eval()


def pixels(grid: list[list[int]], seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    grid_thw = torch.tensor(grid)
    num_patches = int(grid_thw.prod(-1).sum())
    return torch.randn(num_patches, PATCH_FEATURES, generator=torch.Generator().manual_seed(seed)), grid_thw


def reference(model: Glm4vForConditionalGeneration, pixel_values: torch.Tensor,
              grid_thw: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.model.visual(pixel_values, grid_thw=grid_thw).pooler_output


@pytest.mark.parametrize("grid", [TWO_IMAGES, TWO_IMAGES[1:]], ids=["two-images", "one-image"])
def test_matches_transformers_in_float32(checkpoint, grid):
    folder, model = checkpoint
    pixel_values, grid_thw = pixels(grid)
    with torch.no_grad():
        ours = load_encoder(folder)(pixel_values, grid_thw)
    expected = reference(model, pixel_values, grid_thw)
    assert ours.shape == (int(grid_thw.prod(-1).sum()) // 4, DECODER_HIDDEN)
    assert expected.abs().max() > 0.5  # far from zero, so the comparison means something
    assert (ours - expected).abs().max() < PARITY_TOLERANCE


def test_images_in_one_batch_do_not_see_each_other(checkpoint):
    folder, _ = checkpoint
    encoder = load_encoder(folder)
    pixel_values, grid_thw = pixels(TWO_IMAGES)
    first_patches = 4 * 6
    with torch.no_grad():
        together = encoder(pixel_values, grid_thw)
        alone = encoder(pixel_values[:first_patches], grid_thw[:1])
    assert (together[: first_patches // 4] - alone).abs().max() < PARITY_TOLERANCE


def test_int8_weights_stay_close(checkpoint):
    folder, model = checkpoint
    encoder = load_encoder(folder, QuantizeAtLoadLinearMethod(IntWeightFormat(bits=8)))
    quantized = [name for name, module in encoder.named_modules() if hasattr(module, "qweight")]
    assert len(quantized) == 2 + 2 * 4 + 3  # patch embed, downsample; per block qkv, proj, gate_up, down; merger
    pixel_values, grid_thw = pixels(TWO_IMAGES)
    with torch.no_grad():
        ours = encoder(pixel_values, grid_thw)
    expected = reference(model, pixel_values, grid_thw)
    assert (ours - expected).abs().max() < INT8_TOLERANCE * expected.abs().max()


@pytest.mark.parametrize(
    ("grid", "patches", "message"),
    [
        ([[1, 4, 6]], 23, "pixel_values must be"),
        ([[1, 3, 4]], 12, "multiples of the merge size 2"),
        ([[1, 4]], 4, r"grid_thw must be \[num_images, 3\]"),
    ],
)
def test_bad_inputs_say_what_is_wrong(checkpoint, grid, patches, message):
    encoder = load_encoder(checkpoint[0])
    with pytest.raises(ValueError, match=message):
        encoder(torch.zeros(patches, PATCH_FEATURES), torch.tensor(grid))


def test_a_wrong_patch_kernel_is_refused(checkpoint):
    folder, _ = checkpoint
    encoder = Glm4vVisionModel(Glm4vVisionConfig.from_pretrained(folder))
    weights = [("model.visual.patch_embed.proj.weight", torch.zeros(64, 3, 1, 14, 14))]
    with pytest.raises(ValueError, match=r"expects \[out_channels, 3, 2, 14, 14\]"):
        encoder.load_weights(weights)


def test_frames_of_a_video_row_are_encoded_as_images(checkpoint):
    folder, model = checkpoint
    pixel_values, grid_thw = pixels([[2, 4, 4]])
    with torch.no_grad():
        ours = load_encoder(folder)(pixel_values, grid_thw)
    expected = reference(model, pixel_values, torch.tensor([[1, 4, 4], [1, 4, 4]]))
    assert (ours - expected).abs().max() < PARITY_TOLERANCE


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_heads": 3}, "must divide by num_heads 3"),
        ({"hidden_size": 40, "num_heads": 4}, "head_dim 10 must be a multiple of 4"),
        ({"image_size": 100}, "multiple of patch_size 14"),
        ({"patch_size": [14, 14]}, "patch_size must be one integer"),
        ({"rope_parameters": {"rope_type": "default"}}, "rope_type 'default' is not supported; supported: axial"),
    ],
)
def test_bad_vision_configs_say_what_is_wrong(overrides, message):
    with pytest.raises(ValueError, match=message):
        Glm4vVisionConfig.from_dict({**VISION_CONFIG, **overrides})


def test_a_text_only_config_is_refused(tmp_path):
    (tmp_path / "config.json").write_text('{"hidden_size": 32}')
    with pytest.raises(ValueError, match="no 'vision_config'"):
        Glm4vVisionConfig.from_pretrained(tmp_path)
