"""The Qwen2.5-VL vision encoder against transformers' own vision tower, loaded from a tiny random
checkpoint of the full conditional-generation model (so its tensor names are the real ones)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

from autoglm.models.linear_method.int_weights import IntWeightFormat
from autoglm.models.linear_method.quantize_at_load import QuantizeAtLoadLinearMethod
from autoglm.models.qwen2_5_vl_vision import AttentionWindows, Qwen2_5VLVisionModel
from autoglm.models.qwen2_5_vl_vision_config import Qwen2_5VLVisionConfig
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
    "depth": 3,
    "hidden_size": 64,
    "num_heads": 4,
    "intermediate_size": 48,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "window_size": 56,  # 2 x 2 merge units, 4 x 4 patches
    "fullatt_block_indexes": [1],
    "out_hidden_size": DECODER_HIDDEN,
}
# Patches: frames, rows, columns. The first image is 3 x 5 merge units, six windows cut short at
# its right and bottom edges; the second is 4 x 2 units, two whole windows.
TWO_IMAGES = [[1, 6, 10], [1, 8, 4]]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Qwen2_5_VLForConditionalGeneration]:
    """A saved tiny random Qwen2.5-VL and the transformers model it was saved from."""
    config = Qwen2_5_VLConfig(text_config=TEXT_CONFIG, vision_config=VISION_CONFIG)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    folder = tmp_path_factory.mktemp("qwen2_5_vl")
    save_randomised(model, folder)
    return folder, model


def load_encoder(folder: Path, linear_method: QuantizeAtLoadLinearMethod | None = None) -> Qwen2_5VLVisionModel:
    return load_any_encoder(Qwen2_5VLVisionModel, Qwen2_5VLVisionConfig.from_pretrained(folder), folder,
                            linear_method)


@pytest.fixture(scope="module")
def encoder(checkpoint) -> Qwen2_5VLVisionModel:
    return load_encoder(checkpoint[0])


@pytest.mark.parametrize("grid", [TWO_IMAGES, TWO_IMAGES[:1], [[2, 4, 6]]], ids=["two-images", "one-image", "video"])
def test_matches_transformers_in_float32(checkpoint, encoder, grid):
    _, model = checkpoint
    pixel_values, grid_thw = pixels(grid)
    with torch.no_grad():
        ours = encoder(pixel_values, grid_thw)
    expected = reference(model, pixel_values, grid_thw)
    assert ours.shape == (int(grid_thw.prod(-1).sum()) // 4, DECODER_HIDDEN)
    assert expected.abs().max() > 0.5  # far from zero, so the comparison means something
    assert (ours - expected).abs().max() < PARITY_TOLERANCE


def test_windows_regroup_units_window_by_window():
    windows = AttentionWindows.from_grid(torch.tensor([[1, 6, 10]]), 2, 2, torch.device("cpu"))
    # 3 x 5 units: windows of 2 x 2 units, cut to 2 x 1 at the right and 1 x 2, 1 x 1 at the bottom.
    assert windows.unit_order.tolist() == [0, 1, 5, 6, 2, 3, 7, 8, 4, 9, 10, 11, 12, 13, 14]
    assert windows.window_lengths == [16, 16, 8, 8, 8, 4]
    assert windows.patch_order(2)[:8].tolist() == [0, 1, 2, 3, 4, 5, 6, 7]


def test_images_in_one_batch_do_not_see_each_other(encoder):
    pixel_values, grid_thw = pixels(TWO_IMAGES)
    first_patches = 6 * 10
    with torch.no_grad():
        together = encoder(pixel_values, grid_thw)
        alone = encoder(pixel_values[first_patches:], grid_thw[1:])
    assert (together[first_patches // 4:] - alone).abs().max() < PARITY_TOLERANCE


def test_int8_weights_stay_close(checkpoint):
    folder, model = checkpoint
    encoder = load_encoder(folder, QuantizeAtLoadLinearMethod(IntWeightFormat(bits=8)))
    # Patch embed; per block qkv, proj, gate_up, down; the merger's two.
    assert len(quantized_linears(encoder)) == 1 + 3 * 4 + 2
    pixel_values, grid_thw = pixels(TWO_IMAGES)
    with torch.no_grad():
        ours = encoder(pixel_values, grid_thw)
    expected = reference(model, pixel_values, grid_thw)
    assert (ours - expected).abs().max() < INT8_TOLERANCE * expected.abs().max()


@pytest.mark.parametrize(("grid", "patches", "message"), BAD_INPUTS)
def test_bad_inputs_say_what_is_wrong(encoder, grid, patches, message):
    with pytest.raises(ValueError, match=message):
        encoder(torch.zeros(patches, PATCH_FEATURES), torch.tensor(grid))


def test_a_wrong_patch_kernel_is_refused(checkpoint):
    encoder = Qwen2_5VLVisionModel(Qwen2_5VLVisionConfig.from_pretrained(checkpoint[0]))
    weights = [("visual.patch_embed.proj.weight", torch.zeros(64, 3, 1, 14, 14))]
    with pytest.raises(ValueError, match=r"expects \[out_channels, 3, 2, 14, 14\]"):
        encoder.load_weights(weights)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"num_heads": 3}, "must divide by num_heads 3"),
        ({"window_size": 27}, "window_size 27 must be at least patch_size x spatial_merge_size = 28"),
        ({"fullatt_block_indexes": [3]}, r"fullatt_block_indexes must list block indexes in \[0, 3\)"),
        ({"patch_size": [14, 14]}, "patch_size must be one integer"),
        ({"rope_parameters": {"rope_type": "default"}}, "rope_type 'default' is not supported; supported: axial"),
    ],
)
def test_bad_vision_configs_say_what_is_wrong(overrides, message):
    with pytest.raises(ValueError, match=message):
        Qwen2_5VLVisionConfig.from_dict({**VISION_CONFIG, **overrides})
