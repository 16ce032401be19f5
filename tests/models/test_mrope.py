"""M-RoPE positions and angles against transformers' GLM-4.1V and Qwen2.5-VL, built tiny and random."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from transformers import Glm4vConfig, Qwen2_5_VLConfig
from transformers.models.glm4v import modeling_glm4v
from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl

from autoglm.models.model_config import ModelConfig
from autoglm.models.mrope import MultimodalRotaryEmbedding
from autoglm.models.mrope_positions import ImageGrid, mrope_decode_positions, mrope_prompt_positions
from autoglm.models.rotary import RotaryEmbedding

pytestmark = pytest.mark.timeout(60)

IMAGE_TOKEN = 60
IMAGE_OPEN, IMAGE_CLOSE = 58, 59  # GLM-4.1V's <|begin_of_image|> / Qwen2.5-VL's <|vision_start|>, and their ends
MERGE = 2
VISION_CONFIG = {"depth": 1, "hidden_size": 32, "num_heads": 2, "out_hidden_size": 64, "intermediate_size": 32,
                 "spatial_merge_size": MERGE}
ANGLE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Family:
    """One model's reference pieces and how our rotary is built for it."""

    architecture: str
    model: torch.nn.Module
    apply_rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    interleaved: bool
    mrope_section: list[int]

    def model_config(self) -> ModelConfig:
        text = self.model.config.text_config.to_dict()
        return ModelConfig.from_dict({**text, "architectures": [self.architecture]})

    def embedding(self) -> MultimodalRotaryEmbedding:
        return MultimodalRotaryEmbedding(self.model_config(), self.interleaved, self.mrope_section)


def text_config(hidden_size: int, rope_parameters: dict) -> dict:
    return {"vocab_size": 64, "hidden_size": hidden_size, "intermediate_size": 32, "num_hidden_layers": 1,
            "num_attention_heads": 2, "num_key_value_heads": 1, "rope_parameters": rope_parameters}


@pytest.fixture(scope="module")
def glm4v() -> Family:
    """Head dim 64, half of it rotated in interleaved pairs: 16 frequencies."""
    section = [4, 6, 6]
    rope = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5, "mrope_section": section}
    config = Glm4vConfig(text_config=text_config(128, rope), vision_config=VISION_CONFIG, image_token_id=IMAGE_TOKEN)
    return Family("Glm4vForConditionalGeneration", modeling_glm4v.Glm4vModel(config).eval(),
                  modeling_glm4v.apply_rotary_pos_emb, interleaved=True, mrope_section=section)


@pytest.fixture(scope="module")
def qwen2_5_vl() -> Family:
    """Head dim 16, all of it rotated half against half: 8 frequencies."""
    section = [2, 3, 3]
    rope = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": section}
    vision = {**VISION_CONFIG, "fullatt_block_indexes": [0]}
    config = Qwen2_5_VLConfig(text_config=text_config(32, rope), vision_config=vision, image_token_id=IMAGE_TOKEN)
    return Family("Qwen2_5_VLForConditionalGeneration", modeling_qwen2_5_vl.Qwen2_5_VLModel(config).eval(),
                  modeling_qwen2_5_vl.apply_rotary_pos_emb, interleaved=False, mrope_section=section)


@pytest.fixture(params=["glm4v", "qwen2_5_vl"])
def family(request: pytest.FixtureRequest) -> Family:
    return request.getfixturevalue(request.param)


def build_prompt(pieces: list[int | ImageGrid]) -> tuple[list[int], list[ImageGrid]]:
    """Text lengths and image grids in order, as token ids (each image wrapped in its open and close
    tokens) and the grids."""
    token_ids: list[int] = []
    images: list[ImageGrid] = []
    for piece in pieces:
        if isinstance(piece, int):
            token_ids += [(len(token_ids) * 7) % 50 for _ in range(piece)]
        else:
            images.append(piece)
            image_tokens = piece[0] * piece[1] * piece[2] // MERGE**2
            token_ids += [IMAGE_OPEN] + [IMAGE_TOKEN] * image_tokens + [IMAGE_CLOSE]
    return token_ids, images


PROMPTS = {
    "text only": [9],
    "one image": [5, (1, 4, 6), 3],
    "two images": [40, (1, 6, 4), 2, (1, 2, 8), 4],
    "images at both ends": [(1, 4, 4), 1, (1, 8, 2)],
}


def reference_positions(family: Family, token_ids: list[int], images: list[ImageGrid]) -> tuple[torch.Tensor, int]:
    ids = torch.tensor([token_ids])
    grids = torch.tensor(images) if images else None
    positions, deltas = family.model.get_rope_index(ids, (ids == IMAGE_TOKEN).int(), image_grid_thw=grids)
    return positions[:, 0], int(deltas)


@pytest.mark.parametrize("pieces", PROMPTS.values(), ids=PROMPTS.keys())
def test_prompt_positions_and_delta_match_reference(family: Family, pieces: list[int | ImageGrid]) -> None:
    token_ids, images = build_prompt(pieces)
    positions, delta = mrope_prompt_positions(token_ids, images, IMAGE_TOKEN, MERGE)
    expected_positions, expected_delta = reference_positions(family, token_ids, images)
    assert positions.dtype == torch.int64
    assert torch.equal(positions, expected_positions)
    assert delta == expected_delta


def test_generated_tokens_continue_after_the_largest_prompt_position() -> None:
    token_ids, images = build_prompt(PROMPTS["two images"])
    positions, delta = mrope_prompt_positions(token_ids, images, IMAGE_TOKEN, MERGE)
    following = mrope_decode_positions(torch.tensor([len(token_ids), len(token_ids) + 1]), delta)
    first = int(positions.max()) + 1
    assert torch.equal(following, torch.tensor([[first, first + 1]] * 3))


def test_decode_positions_take_one_delta_per_token() -> None:
    following = mrope_decode_positions(torch.tensor([10, 4]), torch.tensor([-3, 0]))
    assert torch.equal(following, torch.tensor([[7, 4]] * 3))


def test_angles_and_rotation_match_reference(family: Family) -> None:
    token_ids, images = build_prompt(PROMPTS["two images"])
    positions, _ = mrope_prompt_positions(token_ids, images, IMAGE_TOKEN, MERGE)
    angles = family.embedding()(positions, torch.float32)
    config = family.model_config()
    probe = torch.zeros(1, dtype=torch.float32)
    cos, sin = family.model.language_model.rotary_emb(probe, positions[:, None, :])
    torch.testing.assert_close(angles.cos[:, 0], cos[0], atol=ANGLE_TOLERANCE, rtol=0)
    torch.testing.assert_close(angles.sin[:, 0], sin[0], atol=ANGLE_TOLERANCE, rtol=0)

    generator = torch.Generator().manual_seed(0)
    q = torch.randn(len(token_ids), config.num_attention_heads, config.head_dim, generator=generator)
    k = torch.randn(len(token_ids), config.num_key_value_heads, config.head_dim, generator=generator)
    q_expected, k_expected = family.apply_rotary(q.transpose(0, 1)[None], k.transpose(0, 1)[None], cos, sin)
    torch.testing.assert_close(angles.rotate(q), q_expected[0].transpose(0, 1), atol=ANGLE_TOLERANCE, rtol=0)
    torch.testing.assert_close(angles.rotate(k), k_expected[0].transpose(0, 1), atol=ANGLE_TOLERANCE, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_text_positions_give_exactly_the_plain_rotary_angles(family: Family, dtype: torch.dtype) -> None:
    positions = torch.cat((torch.arange(300), torch.tensor([4095, 65535])))
    plain = RotaryEmbedding(family.model_config(), family.interleaved)(positions, dtype)
    multimodal = family.embedding()(positions.expand(3, -1), dtype)
    assert multimodal.interleaved == plain.interleaved
    assert torch.equal(multimodal.cos, plain.cos) and torch.equal(multimodal.sin, plain.sin)


@pytest.mark.parametrize(("pieces", "images", "message"), [
    ([5, (1, 4, 4)], [], "1 runs of the image token"),
    ([5, (1, 4, 4)], [(1, 4, 6)], "holds 4"),
    ([5, (1, 4, 4)], [(2, 4, 4)], "one temporal patch"),
    ([5, (1, 4, 4)], [(1, 4, 5)], "multiples of the merge size"),
    ([5, (1, 4, 4)], [(1, 4)], "three ints"),
    ([5, (1, 4, 4)], [4], "three ints"),
    ([], [], "at least one token"),
], ids=["grid missing", "run length", "frames", "merge", "grid shape", "grid type", "empty"])
def test_bad_prompts_are_named(pieces: list, images: list, message: str) -> None:
    token_ids, _ = build_prompt(pieces)
    with pytest.raises(ValueError, match=message):
        mrope_prompt_positions(token_ids, images, IMAGE_TOKEN, MERGE)


def test_bad_merge_size_is_named() -> None:
    with pytest.raises(ValueError, match="spatial_merge_size must be a positive int"):
        mrope_prompt_positions([1, 2], [], IMAGE_TOKEN, 0)


def test_bad_sections_and_positions_are_named(glm4v: Family) -> None:
    config = glm4v.model_config()
    with pytest.raises(ValueError, match="covers 15 frequencies; it must cover all 16"):
        MultimodalRotaryEmbedding(config, True, [4, 6, 5])
    with pytest.raises(ValueError, match="positive ints"):
        MultimodalRotaryEmbedding(config, True, [4, 0, 12])
    embedding = glm4v.embedding()
    with pytest.raises(ValueError, match=r"must be \[3, T\]"):
        embedding(torch.arange(4), torch.float32)
    with pytest.raises(ValueError, match="must be integers"):
        embedding(torch.zeros(3, 4), torch.float32)
    with pytest.raises(ValueError, match="1-D integer tensor"):
        mrope_decode_positions(torch.zeros(2, 2, dtype=torch.int64), 0)
