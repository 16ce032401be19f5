"""The GLM-4.1V vision encoder against transformers' own vision tower, loaded from a tiny random
checkpoint of the full conditional-generation model (so its tensor names are the real ones)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import Glm4vConfig, Glm4vForConditionalGeneration

from autoglm.models.glm4v_vision import Glm4vVisionModel
from autoglm.models.glm4v_vision_config import Glm4vVisionConfig
from autoglm.models.linear_method.int_weights import IntWeightFormat
from autoglm.models.linear_method.quantize_at_load import QuantizeAtLoadLinearMethod
from tests.models.vision_towers import (
    BAD_INPUTS,
    DECODER_HIDDEN,
    INT8_TOLERANCE,
    PARITY_TOLERANCE,
    PATCH_FEATURES,
    TEXT_CONFIG,
    pixels,
    quantized_linears,
    reference,
    save_randomised,
)
from tests.models.vision_towers import load_encoder as load_any_encoder

pytestmark = pytest.mark.timeout(120)

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
TWO_IMAGES = [[1, 4, 6], [1, 8, 4]]  # patches: frames, rows, columns; different sizes and aspect ratios


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Glm4vForConditionalGeneration]:
    """A saved tiny random GLM-4.1V and the transformers model it was saved from."""
    model = Glm4vForConditionalGeneration(Glm4vConfig(text_config=TEXT_CONFIG, vision_config=VISION_CONFIG)).eval()
    folder = tmp_path_factory.mktemp("glm4v")
    save_randomised(model, folder)
    return folder, model


def load_encoder(folder: Path, linear_method: QuantizeAtLoadLinearMethod | None = None) -> Glm4vVisionModel:
    return load_any_encoder(Glm4vVisionModel, Glm4vVisionConfig.from_pretrained(folder), folder, linear_method)


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
    # Patch embed, downsample; per block qkv, proj, gate_up, down; merger.
    assert len(quantized_linears(encoder)) == 2 + 2 * 4 + 3
    pixel_values, grid_thw = pixels(TWO_IMAGES)
    with torch.no_grad():
        ours = encoder(pixel_values, grid_thw)
    expected = reference(model, pixel_values, grid_thw)
    assert (ours - expected).abs().max() < INT8_TOLERANCE * expected.abs().max()


@pytest.mark.parametrize(("grid", "patches", "message"), BAD_INPUTS)
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
