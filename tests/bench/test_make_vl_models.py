"""``autoglm bench make-model``'s vision-language shapes: folders transformers loads and runs on an image, and
AutoGLM-Phone-9B's published size."""
from __future__ import annotations

import json
import struct

import pytest
import torch
import transformers
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoTokenizer

from autoglm.bench.cli import main
from autoglm.bench.make_model.checkpoint import shape_config
from tests.vision_processor import image_only_processor

TINY_SHAPES = {
    # shape: (architecture, config fields of the image markers, the markers an image part renders as)
    "glm4v-tiny": ("Glm4vForConditionalGeneration",
                   {"image_start_token_id": "<|begin_of_image|>", "image_token_id": "<|image|>",
                    "image_end_token_id": "<|end_of_image|>", "video_token_id": "<|video|>"},
                   "<|begin_of_image|><|image|><|end_of_image|>"),
    "qwen2.5-vl-tiny": ("Qwen2_5_VLForConditionalGeneration",
                        {"vision_start_token_id": "<|vision_start|>", "image_token_id": "<|image_pad|>",
                         "vision_end_token_id": "<|vision_end|>", "video_token_id": "<|video_pad|>"},
                        "<|vision_start|><|image_pad|><|vision_end|>"),
}
IMAGE_MESSAGES = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is here?"}]}]
PHONE_LAYER_PARAMETERS = 203_969_024
PHONE_VISION_PARAMETERS = 892_498_432


def make(shape: str, out, *arguments: str) -> None:
    main(["make-model", "--shape", shape, *arguments, "--out", str(out)])


@pytest.fixture(scope="module", params=list(TINY_SHAPES))
def tiny_folder(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    make(request.param, folder, "--dtype", "float32")
    return request.param, folder


def test_tiny_folder_holds_a_hugging_face_checkpoint(tiny_folder):
    shape, folder = tiny_folder
    architecture, _, _ = TINY_SHAPES[shape]
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json", "chat_template.jinja", "preprocessor_config.json"} <= {
        path.name for path in folder.iterdir()}
    assert json.loads((folder / "config.json").read_text())["architectures"] == [architecture]
    image_processor = json.loads((folder / "preprocessor_config.json").read_text())
    assert (image_processor["patch_size"], image_processor["merge_size"], image_processor["temporal_patch_size"]) \
        == (14, 2, 2)


def test_tiny_config_token_ids_point_at_the_marker_tokens(tiny_folder):
    shape, folder = tiny_folder
    _, marker_fields, _ = TINY_SHAPES[shape]
    config = json.loads((folder / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(folder)
    vocab_size = config["text_config"]["vocab_size"]
    for field, marker in marker_fields.items():
        assert tokenizer.convert_tokens_to_ids(marker) == config[field] < vocab_size
        assert tokenizer.encode(marker, add_special_tokens=False) == [config[field]]
        assert tokenizer.decode([config[field]], skip_special_tokens=True) == ""
    end_ids = config["text_config"]["eos_token_id"]
    assert all(token_id < vocab_size for token_id in (end_ids if isinstance(end_ids, list) else [end_ids]))


def test_tiny_model_generates_from_a_templated_prompt_and_an_image(tiny_folder):
    shape, folder = tiny_folder
    _, _, image_markers = TINY_SHAPES[shape]
    processor = image_only_processor(folder)
    prompt = processor.apply_chat_template(IMAGE_MESSAGES, tokenize=False, add_generation_prompt=True)
    assert image_markers + "What is here?" in prompt
    inputs = processor(text=[prompt], images=[Image.new("RGB", (56, 84), (200, 30, 10))], return_tensors="pt")
    grid = inputs["image_grid_thw"]
    assert grid.shape == (1, 3) and inputs["pixel_values"].shape[0] == int(grid.prod())
    model = AutoModelForImageTextToText.from_pretrained(folder)
    assert type(model).__name__ == TINY_SHAPES[shape][0] and model.dtype == torch.float32
    image_tokens = int((inputs["input_ids"] == model.config.image_token_id).sum())
    assert image_tokens == int(grid.prod()) // 4  # one token per 2 x 2 merged patches
    output = model.generate(**inputs, max_new_tokens=3, do_sample=False)
    assert output.shape == (1, inputs["input_ids"].shape[1] + 3)
    assert int(output.max()) < model.config.text_config.vocab_size


def test_chat_template_refuses_an_unknown_content_part(tiny_folder):
    _, folder = tiny_folder
    tokenizer = AutoTokenizer.from_pretrained(folder)
    with pytest.raises(Exception, match="type text or image, not audio"):
        tokenizer.apply_chat_template([{"role": "user", "content": [{"type": "audio"}]}], tokenize=False)


# ---- autoglm-phone-9b: the published size ------------------------------------------------
def test_phone_shape_has_the_published_parameter_counts():
    config = shape_config("autoglm-phone-9b")
    text, vision = config.text_config, config.vision_config
    assert (text.hidden_size, text.num_hidden_layers, text.num_attention_heads, text.num_key_value_heads,
            text.intermediate_size, text.vocab_size) == (4096, 40, 32, 2, 13696, 151552)
    assert text.rope_parameters["partial_rotary_factor"] == 0.5
    assert text.rope_parameters["mrope_section"] == [8, 12, 12] and text.rope_parameters["rope_theta"] == 10000
    assert (vision.depth, vision.hidden_size, vision.num_heads, vision.intermediate_size, vision.patch_size,
            vision.spatial_merge_size, vision.temporal_patch_size, vision.image_size, vision.out_hidden_size) == (
        24, 1536, 12, 13696, 14, 2, 2, 336, 4096)
    with torch.device("meta"):
        model = transformers.Glm4vForConditionalGeneration(config)
    count = lambda module: sum(parameter.numel() for parameter in module.parameters())  # noqa: E731
    hidden, kv_width, mlp = 4096, 2 * 128, 13696
    attention = (hidden * hidden + hidden) + 2 * (hidden * kv_width + kv_width) + hidden * hidden
    assert count(model.model.language_model.layers[0]) == attention + 3 * hidden * mlp + 4 * hidden \
        == PHONE_LAYER_PARAMETERS
    assert count(model.model.visual) == PHONE_VISION_PARAMETERS
    assert round(count(model) / 1e9, 1) == 10.3  # the published model's size


def safetensors_shapes(path) -> dict[str, list[int]]:
    with open(path, "rb") as file:
        header = json.loads(file.read(struct.unpack("<Q", file.read(8))[0]))
    return {name: entry["shape"] for name, entry in header.items() if name != "__metadata__"}


def test_phone_shape_writes_a_few_real_decoder_layers(tmp_path):
    # Two decoder layers of the real attention width; the MLP, vocabulary and vision tower shrunk so the folder
    # writes in seconds (the real sizes are counted above).
    make("autoglm-phone-9b", tmp_path, "--layers", "2", "--override", "text_config.vocab_size=1024",
         "--override", "text_config.intermediate_size=1024",
         "--override", "text_config.pad_token_id=0", "--override", "vision_config.depth=1",
         "--override", "vision_config.intermediate_size=64")
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["text_config"]["num_hidden_layers"] == 2 and config["text_config"]["hidden_size"] == 4096
    weights = tmp_path / "model.safetensors"
    shapes = safetensors_shapes(weights)
    numel = {name: torch.Size(shape).numel() for name, shape in shapes.items()}
    narrow_mlp = 3 * 4096 * (13696 - 1024)
    assert sum(n for name, n in numel.items() if ".language_model.layers.1." in name) == \
        PHONE_LAYER_PARAMETERS - narrow_mlp
    assert not any(".layers.2." in name for name in shapes)
    bfloat16_bytes = 2 * sum(numel.values())
    assert bfloat16_bytes < weights.stat().st_size < bfloat16_bytes + 2**20
