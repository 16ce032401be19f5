"""GLM-4.1V and Qwen2.5-VL through the engine with images in the prompt: greedy tokens and log-probs equal to
transformers' ``generate`` in float32, under chunked prefill, prefix caching, preemption and n = 2; bad images
refused."""
from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from peft import LoraConfig, get_peft_model
from PIL import Image
from transformers import AutoConfig, Glm4vForConditionalGeneration, Qwen2_5_VLForConditionalGeneration

from autoglm import LLM
from autoglm.bench.cli import main
from autoglm.engine.prompt_images import PromptVision
from autoglm.engine.tokenize import TokenizedPrompt
from autoglm.errors import InvalidRequestError, LoRAAdapterError
from autoglm.lora_request import LoRARequest
from autoglm.models.image_input_spec import ImageInputSpec
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig
from autoglm.multimodal import ImageInput, MultiModalPrompt
from autoglm.sampling_params import SamplingParams
from tests.engine.kv_pool import kv_bytes_for_blocks
from tests.vision_processor import image_only_processor

pytestmark = pytest.mark.timeout(300)

WEIGHT_STD = 0.15  # wider than a real init, so that greedy choices are far from ties
RED_TALL = Image.new("RGB", (56, 84), (200, 30, 10))
BLUE_WIDE = Image.new("RGB", (84, 56), (10, 100, 220))
GREEN_TALL = Image.new("RGB", (56, 84), (20, 180, 40))  # the size of RED_TALL, other pixels
ONE_IMAGE = "look {image} now"
TWO_IMAGES = "one {image} two {image} three"
LONG_AFTER = "see {image} and tell me what it shows in a few words"  # its image lies in full blocks
IMAGE_PROMPTS = ((ONE_IMAGE, [RED_TALL]), (TWO_IMAGES, [RED_TALL, BLUE_WIDE]))  # one image, then two
MAX_TOKENS = 6
SPECULATED_TOKENS = 32
LOGPROB_TOLERANCE = 1e-4
ADAPTER_B_STD = 0.3  # PEFT starts lora_B at zero, which would change nothing
BLOCK_SIZE = 4


@dataclass(frozen=True)
class Shape:
    """A tiny checkpoint's make-model shape, its transformers class and how its prompts write one image."""

    name: str
    reference_class: type
    image: str


SHAPES = [
    Shape("glm4v-tiny", Glm4vForConditionalGeneration, "<|begin_of_image|><|image|><|end_of_image|>"),
    Shape("qwen2.5-vl-tiny", Qwen2_5_VLForConditionalGeneration, "<|vision_start|><|image_pad|><|vision_end|>"),
]


@dataclass
class Reference:
    prompt: TokenizedPrompt
    token_ids: list[int]
    logprobs: list[float]


@pytest.fixture(scope="module", params=SHAPES, ids=lambda shape: shape.name)
def shape(request) -> Shape:
    return request.param


@pytest.fixture(scope="module")
def folder(tmp_path_factory, shape):
    """A tiny checkpoint with its tokenizer and image processor, its weights spread wider."""
    path = tmp_path_factory.mktemp(shape.name)
    main(["make-model", "--shape", shape.name, "--dtype", "float32", "--out", str(path)])
    model = shape.reference_class.from_pretrained(path)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            parameter.copy_(1.0 + 0.1 * noise if "norm" in name and name.endswith("weight") else WEIGHT_STD * noise)
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def reference(folder, shape):
    """The transformers model and its processor (images only: the video processor needs torchvision)."""
    processor = image_only_processor(folder)
    return shape.reference_class.from_pretrained(folder).eval(), processor


def vision_llm(folder: Path, **settings) -> LLM:
    """An engine on the tiny checkpoint in float32, blocks of BLOCK_SIZE, with ``settings`` besides."""
    return LLM(model=str(folder), dtype="float32", max_context_len=256, block_size=BLOCK_SIZE, **settings)


@pytest.fixture(scope="module")
def llm(folder):
    return vision_llm(folder)


def generate_reference(reference, template: str, image: str, images: list[Image.Image],
                       max_tokens: int = MAX_TOKENS) -> Reference:
    """The prompt (``template`` with each ``{image}`` written as ``image``) as the engine takes it, and
    transformers' greedy tokens with their log-probs."""
    model, processor = reference
    text = template.format(image=image)
    inputs = processor(text=[text], images=images or None, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=max_tokens, do_sample=False, output_logits=True,
                                return_dict_in_generate=True)
    token_ids = inputs["input_ids"][0].tolist()
    generated = output.sequences[0, len(token_ids):].tolist()
    logprobs = [torch.log_softmax(logits[0].float(), -1)[token].item()
                for logits, token in zip(output.logits, generated)]
    multi_modal = None
    if images:
        grids = [tuple(grid) for grid in inputs["image_grid_thw"].tolist()]
        pixels = inputs["pixel_values"].split([t * h * w for t, h, w in grids])
        multi_modal = MultiModalPrompt(tuple(ImageInput(patches, grid, digest(patches))
                                             for patches, grid in zip(pixels, grids)))
    return Reference(TokenizedPrompt(token_ids, text, multi_modal), generated, logprobs)


def digest(patches: torch.Tensor) -> bytes:
    return hashlib.sha256(patches.numpy().tobytes()).digest()


def run(llm: LLM, prompts: list[TokenizedPrompt], n: int = 1, max_tokens: int = MAX_TOKENS,
        lora_request: LoRARequest | None = None):
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, logprobs=0, n=n)
    return llm.generate(prompts, params, use_tqdm=False, lora_request=lora_request)


def assert_matches(completion, expected: Reference) -> None:
    assert list(completion.token_ids) == expected.token_ids
    got = [next(iter(position.values())).logprob for position in completion.logprobs]
    assert got == pytest.approx(expected.logprobs, abs=LOGPROB_TOLERANCE)


def encoder_calls(llm: LLM) -> int:
    return llm.engine.runner.encoder_cache.num_encoder_calls


@pytest.fixture(scope="module")
def references(reference, shape):
    return {
        "one": generate_reference(reference, ONE_IMAGE, shape.image, [RED_TALL]),
        "two": generate_reference(reference, TWO_IMAGES, shape.image, [RED_TALL, BLUE_WIDE]),
        "text": generate_reference(reference, "no picture in this prompt at all", shape.image, []),
        "long_red": generate_reference(reference, LONG_AFTER, shape.image, [RED_TALL]),
        "long_green": generate_reference(reference, LONG_AFTER, shape.image, [GREEN_TALL]),
    }


def test_images_and_text_equal_transformers_in_one_batch(llm, references):
    names = ["one", "two", "text"]
    calls = encoder_calls(llm)
    outputs = run(llm, [references[name].prompt for name in names])
    for name, output in zip(names, outputs):
        assert_matches(output.outputs[0], references[name])
    assert encoder_calls(llm) == calls + 1  # the three images of both prompts in one call
    assert not llm.engine.runner.encoder_cache.rows and not llm.engine.encoded_images.held


def test_an_image_is_released_by_the_step_that_computes_its_last_placeholder(llm, references):
    """A one-token request finishes in its prompt's step: the idle engine then holds no encoded rows."""
    params = SamplingParams(temperature=0.0, max_tokens=1)
    llm.generate([references["two"].prompt], params, use_tqdm=False)
    assert not llm.engine.runner.encoder_cache.rows and not llm.engine.encoded_images.held


def test_chunked_prefill_splits_the_text_around_images(folder, references):
    chunked = vision_llm(folder, max_num_batched_tokens=5, enable_prefix_caching=False)
    for name in ("one", "two"):
        assert_matches(run(chunked, [references[name].prompt])[0].outputs[0], references[name])


def test_chunks_end_inside_no_image():
    image = ImageInput(torch.zeros(24, 1176), (1, 6, 4), b"red")
    vision = PromptVision.build([0, 0] + [9] * 6 + [0, 0], MultiModalPrompt((image,)),
                                ImageInputSpec(image_token_id=9, spatial_merge_size=2, patch_features=1176))
    assert vision.chunk_end(0, 5) == 2  # cut before the image
    assert vision.chunk_end(2, 5) == 8  # starts at the image: all of it, past the budget of 3
    assert vision.chunk_end(4, 6) == 8  # starts inside it (a cached prefix): to its end
    assert vision.chunk_end(0, 8) == 8 and vision.chunk_end(8, 9) == 9


def test_the_same_image_hits_the_prefix_cache_and_another_misses(llm, references):
    red, green = references["long_red"], references["long_green"]
    first = run(llm, [red.prompt])[0]
    assert_matches(first.outputs[0], red)
    calls = encoder_calls(llm)
    again = run(llm, [red.prompt])[0]
    assert_matches(again.outputs[0], red)
    image_token_id = llm.engine.model_config.vision.image_token_id
    image_end = len(red.prompt.token_ids) - red.prompt.token_ids[::-1].index(image_token_id)
    assert again.num_cached_tokens >= image_end and encoder_calls(llm) == calls  # no encoder work
    other = run(llm, [green.prompt])[0]
    assert_matches(other.outputs[0], green)
    image_start = green.prompt.token_ids.index(image_token_id)
    assert other.num_cached_tokens == image_start // BLOCK_SIZE * BLOCK_SIZE
    assert encoder_calls(llm) == calls + 1


def test_preemption_recomputes_the_same_tokens(folder, llm, references):
    names = ["two", "long_red", "one"]
    prompt_blocks = sum(-(-len(references[name].prompt.token_ids) // BLOCK_SIZE) for name in names)
    tight = vision_llm(folder, kv_cache_memory=kv_bytes_for_blocks(llm, prompt_blocks), enable_prefix_caching=False)
    outputs = run(tight, [references[name].prompt for name in names])
    assert tight.engine.scheduler.num_preemptions > 0
    for name, output in zip(names, outputs):
        assert_matches(output.outputs[0], references[name])


def test_two_completions_share_the_image(llm, references):
    output = run(llm, [references["two"].prompt], n=2)[0]
    for completion in output.outputs:
        assert_matches(completion, references["two"])


@pytest.mark.parametrize(("change", "message"), [
    (lambda ids, images, token: (ids, images[:1]), "holds 2 runs of the image placeholder token {token} but 1 images"),
    (lambda ids, images, token: (ids[:ids.index(token)] + ids[ids.index(token) + 1:], images),
     "holds {short} tokens, but its grid {grid} merges to {patches} / 2^2 = {tokens}"),
    (lambda ids, images, token: (ids, (ImageInput(images[0].pixel_values[:, :100], images[0].grid_thw, b"x"),
                                       images[1])),
     "pixel_values must be a float tensor of [patches, features] = [{patches}, 1176] for grid {grid}, "
     "got ({patches}, 100)"),
    (lambda ids, images, token: (ids, (ImageInput(images[0].pixel_values, (2, 6, 4), b"x"), images[1])),
     "must be one frame"),
])
def test_bad_images_are_refused(llm, references, change, message):
    """``message`` names the first image's placeholder token, grid, patches and tokens as the model reads them."""
    prompt = references["two"].prompt
    token = llm.engine.model_config.vision.image_token_id
    grid = prompt.multi_modal.images[0].grid_thw
    patches = math.prod(grid)
    message = message.format(token=token, grid=grid, patches=patches, tokens=patches // 4, short=patches // 4 - 1)
    token_ids, images = change(list(prompt.token_ids), prompt.multi_modal.images, token)
    with pytest.raises(InvalidRequestError, match=re.escape(message)):
        llm.engine.add_request("bad", TokenizedPrompt(token_ids, multi_modal=MultiModalPrompt(tuple(images))))
    assert not llm.engine.has_unfinished_requests()


def test_a_text_model_refuses_images(references):
    with pytest.raises(InvalidRequestError, match="this model takes no images, but the prompt has 1"):
        PromptVision.build(references["one"].prompt.token_ids, references["one"].prompt.multi_modal, None)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("parallelism", [{"tensor_parallel_size": 2}, {"pipeline_parallel_size": 2}],
                         ids=["tp2", "pp2"])
def test_two_ranks_equal_transformers(folder, references, parallelism):
    """Tensor-parallel ranks each encode the step's images (the encoder whole on every rank) and hold half the
    decoder; of two pipeline stages the first holds the encoder and the embedding, and both turn by the
    three-axis positions. Chunked, so that an image's rows and its prompt's positions span steps."""
    parallel = vision_llm(folder, max_num_batched_tokens=5, **parallelism)
    try:
        names = ["one", "two", "text"]
        for name, output in zip(names, run(parallel, [references[name].prompt for name in names])):
            assert_matches(output.outputs[0], references[name])
        assert_matches(run(parallel, [references["one"].prompt])[0].outputs[0], references["one"])  # a prefix hit
    finally:
        parallel.close()


def test_config_reads_the_decoder_from_text_config(folder):
    config = ModelConfig.from_pretrained(folder)
    expected = AutoConfig.from_pretrained(folder)
    text, rope = expected.text_config, expected.text_config.rope_parameters
    eos_token_ids = text.eos_token_id if isinstance(text.eos_token_id, list) else [text.eos_token_id]
    assert (config.architecture, config.hidden_size, config.num_hidden_layers, config.eos_token_ids) == (
        expected.architectures[0], text.hidden_size, text.num_hidden_layers, eos_token_ids)
    assert (config.rope.rope_type, config.rope.theta, config.rope.partial_rotary_factor) == (
        rope["rope_type"], rope["rope_theta"], rope.get("partial_rotary_factor", 1.0))
    assert config.rope.mrope_section == tuple(rope["mrope_section"])
    assert config.vision.image_token_id == expected.image_token_id and ImageInputSpec.of(config).patch_features == 1176


def test_weights_load_under_the_module_names_of_transformers_5(llm, reference):
    """A state dict with ``model.language_model.`` and ``model.visual.`` fills the model as the saved checkpoint did."""
    state = reference[0].state_dict()
    assert any(name.startswith("model.language_model.") for name in state)
    served = llm.engine.runner.model
    model = type(served)(served.config, LinearMethods())
    model.load_weights(state.items())
    served_parameters = dict(served.named_parameters())
    for name, parameter in model.named_parameters():
        assert torch.equal(parameter, served_parameters[name]), name


def test_the_hub_spelling_of_multimodal_rotary_reads_as_the_default_frequencies():
    text = {"vocab_size": 384, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 4, "rms_norm_eps": 1e-6, "max_position_embeddings": 2048,
            "rope_theta": 1000000.0, "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}
    config = ModelConfig.from_dict({"architectures": ["Qwen2_5_VLForConditionalGeneration"], "text_config": text,
                                    "image_token_id": 6, "vision_config": {}})
    assert (config.rope.rope_type, config.rope.theta, config.rope.mrope_section) == ("default", 1e6, (2, 3, 3))
    assert ImageInputSpec.of(config) == ImageInputSpec(image_token_id=6, spatial_merge_size=2, patch_features=1176)


def test_ngram_speculation_over_images_keeps_the_tokens(folder, reference, shape):
    """Draft tokens after an image turn by the prompt's position delta, as the tokens they stand for; long enough
    outputs that the tiny model repeats itself, so that n-grams propose."""
    speculating = vision_llm(folder, speculative_config={"method": "ngram", "num_speculative_tokens": 3,
                                                         "prompt_lookup_min": 1, "prompt_lookup_max": 2})
    expected = [generate_reference(reference, template, shape.image, images, max_tokens=SPECULATED_TOKENS)
                for template, images in IMAGE_PROMPTS]
    outputs = run(speculating, [entry.prompt for entry in expected], max_tokens=SPECULATED_TOKENS)
    for output, entry in zip(outputs, expected):
        assert_matches(output.outputs[0], entry)
    assert speculating.engine.get_stats().spec_decode.num_draft_tokens > 0


def make_language_adapter(folder: Path, shape: Shape, path: Path, targets: str | list[str]):
    """A PEFT adapter of the checkpoint with random lora_B, saved to ``path``, and the PEFT model it came from."""
    model = shape.reference_class.from_pretrained(folder).eval()  # its own copy: PEFT changes the model it wraps
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=targets, lora_dropout=0.0))
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(ADAPTER_B_STD * torch.randn(parameter.shape, generator=generator))
    peft_model.save_pretrained(path)
    return peft_model.eval()


def test_an_adapter_of_the_language_model_equals_peft_beside_images(folder, reference, references, shape, tmp_path):
    """PEFT names a vision-language model's decoder under model.language_model.; the adapter is served on the
    decoder as transformers + PEFT computes it, images and all. One that changes the vision encoder is refused."""
    peft_model = make_language_adapter(folder, shape, tmp_path / "language", r".*language_model.*\.(q_proj|v_proj|"
                                                                              r"o_proj|gate_proj|down_proj)")
    processor = reference[1]
    expected = [generate_reference((peft_model, processor), template, shape.image, images)
                for template, images in IMAGE_PROMPTS]
    base = references["one"]  # the same prompt without the adapter
    assert expected[0].token_ids != base.token_ids or expected[0].logprobs != base.logprobs
    served = vision_llm(folder, enable_lora=True, max_lora_rank=8)
    adapter = LoRARequest("language", 1, str(tmp_path / "language"))
    outputs = run(served, [entry.prompt for entry in expected], lora_request=adapter)
    for output, entry in zip(outputs, expected):
        assert_matches(output.outputs[0], entry)
    make_language_adapter(folder, shape, tmp_path / "vision", ["q_proj", "gate_proj"])  # the encoder has gate_proj
    with pytest.raises(LoRAAdapterError, match="changes the vision encoder, which takes no adapter here"):
        served.engine.add_lora(LoRARequest("vision", 2, str(tmp_path / "vision")))


def test_an_image_prompt_the_pool_evicted_comes_back_from_the_host_tier_and_after_a_restart_from_disk(
        folder, llm, references, tmp_path):
    """The tiers keep blocks by the block hash, which covers the image: the same image restores, another of its
    size does not (from memory or, after a restart, from disk), and the tokens stay transformers'."""
    red, green = references["long_red"], references["long_green"]
    pool = kv_bytes_for_blocks(llm, 16)
    tiers = {"kv_cache_memory": pool, "kv_offload_bytes": 4 * pool, "kv_disk_path": str(tmp_path / "blocks")}
    image_token_id = llm.engine.model_config.vision.image_token_id
    image_start = red.prompt.token_ids.index(image_token_id)
    tiered = vision_llm(folder, **tiers)
    try:
        assert_matches(run(tiered, [red.prompt])[0].outputs[0], red)
        for name in ("two", "one", "text"):  # each fills the pool, pushing the first prompt's blocks down a tier
            run(tiered, [references[name].prompt])
        again = run(tiered, [red.prompt])[0]
        assert_matches(again.outputs[0], red)
        host, _ = tiered.engine.get_stats().kv_tiers
        assert again.num_cached_tokens > image_start and host.hits > 0  # the image's blocks too, from memory
        other = run(tiered, [green.prompt])[0]
        assert_matches(other.outputs[0], green)
        assert other.num_cached_tokens <= image_start
    finally:
        tiered.close()
    restarted = vision_llm(folder, **tiers)
    try:
        from_disk = run(restarted, [red.prompt])[0]
        assert_matches(from_disk.outputs[0], red)
        _, disk = restarted.engine.get_stats().kv_tiers
        assert from_disk.num_cached_tokens > image_start and disk.hits > 0
    finally:
        restarted.close()
