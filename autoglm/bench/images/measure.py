"""``autoglm bench images``: one model folder, the same screenshots, every measure in one run.

The engine goes first: each timed screenshot is sent cold (a new image, which the prefix cache misses)
and then again (a hit on its whole prompt), and its vision encoder is called one image at a time and
then on a batch. With the engine freed, transformers runs its forward over the same prompts and pixels,
encoder and prefill to the first token. Each measure repeats ``num_iters`` times after a warm-up.
Preprocessing happens before any timer starts, on both sides alike.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForImageTextToText

from autoglm.bench.images.encoder_profile import EncoderProfile, profile_encoder
from autoglm.bench.images.samples import Samples
from autoglm.bench.images.screenshots import draw_screenshot, preprocess, screenshot_prompt
from autoglm.bench.lib.engine_run import bench_llm
from autoglm.bench.lib.timing import timed_seconds
from autoglm.bench.results.report import dtype_name
from autoglm.config import AutoGLMConfig
from autoglm.engine.tokenize import TokenizedPrompt
from autoglm.llm import LLM
from autoglm.models.model_config import ModelConfig
from autoglm.models import resolve_dtype
from autoglm.multimodal import ImageInput
from autoglm.sampling_params import SamplingParams
from autoglm.image_inputs.preprocess import ImagePreprocessor

DECODER_SIZES = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "vocab_size")
ENCODER_SIZES = ("depth", "hidden_size", "intermediate_size", "num_heads", "out_hidden_size", "patch_size",
                 "spatial_merge_size")


@dataclass(frozen=True)
class ImagesSettings:
    config: AutoGLMConfig
    max_pixels: int  # the largest area the image processor scales a screenshot into
    batch_size: int  # images in the batched encoder call
    num_iters: int  # timed repeats of each measure, after one warm-up
    baseline: str | None  # "transformers", or None to run the engine alone


@dataclass(frozen=True)
class ScreenshotInputs:
    """What both sides take: each screenshot preprocessed once, and its prompt."""

    images: list[ImageInput]
    prompts: list[TokenizedPrompt]
    preprocess_s: Samples


@dataclass(frozen=True)
class EngineImages:
    compute_dtype: str
    cold_ttft_s: Samples
    hit_ttft_s: Samples
    cached_tokens: int  # of the second request's prompt, served from the prefix cache
    one_at_a_time: Samples  # encoder images per second, one image a call
    batched: Samples  # encoder images per second, ``batch_size`` images a call
    profile: EncoderProfile  # one encoder call of one image


@dataclass(frozen=True)
class BaselineImages:
    compute_dtype: str
    ttft_s: Samples


@dataclass(frozen=True)
class ImagesRun:
    shapes: dict[str, Any]  # the decoder's and the vision encoder's sizes
    inputs: ScreenshotInputs
    engine: EngineImages
    baseline: BaselineImages | None


def model_shapes(config: ModelConfig) -> dict[str, Any]:
    """The sizes that set the cost of an image: the decoder's and the encoder's, as the checkpoint writes them."""
    decoder = {name: getattr(config, name) for name in DECODER_SIZES}
    encoder = {name: config.vision.vision_config[name] for name in ENCODER_SIZES if name in config.vision.vision_config}
    return {"decoder": decoder, "vision": encoder}


def screenshot_inputs(llm: LLM, settings: ImagesSettings) -> ScreenshotInputs:
    """``max(num_iters + 1, batch_size)`` different screenshots: one per timed request (the first warms up)
    and enough for the batch."""
    engine = llm.engine
    vision = engine.model_config.vision
    preprocessor = ImagePreprocessor(Path(engine.model_path), {})
    images, preprocess_s = [], []
    for seed in range(max(settings.num_iters + 1, settings.batch_size)):
        screenshot = draw_screenshot(seed)
        start = time.perf_counter()
        images.append(preprocess(preprocessor, screenshot, settings.max_pixels))
        preprocess_s.append(time.perf_counter() - start)
    prompts = [screenshot_prompt(engine.tokenizer, vision.image_token_id, preprocessor.num_tokens(image), image)
               for image in images[:settings.num_iters + 1]]
    return ScreenshotInputs(images, prompts, Samples(preprocess_s[1:] or preprocess_s))


def _first_token(llm: LLM, prompt: TokenizedPrompt):
    params = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
    return llm.generate([prompt], params, use_tqdm=False)[0]


def _ttft(output) -> float:
    return output.metrics.first_token_time - output.metrics.arrival_time


def _images_per_s(encode, images: list[ImageInput], batched: bool, device: torch.device) -> float:
    calls = [images] if batched else [[image] for image in images]
    with torch.inference_mode():
        return len(images) / timed_seconds(lambda: [encode(call) for call in calls], device)


def engine_images(llm: LLM, inputs: ScreenshotInputs, settings: ImagesSettings) -> EngineImages:
    cold, hit, cached_tokens = [], [], 0
    for prompt in inputs.prompts:
        cold.append(_ttft(_first_token(llm, prompt)))
        again = _first_token(llm, prompt)
        hit.append(_ttft(again))
        cached_tokens = again.num_cached_tokens
    engine = llm.engine
    encode, device = engine.runner.model.encode_images, engine.device
    batch = inputs.images[:settings.batch_size]
    rates = {batched: [_images_per_s(encode, batch, batched, device) for _ in range(settings.num_iters + 1)][1:]
             for batched in (False, True)}
    with torch.inference_mode():
        profile = profile_encoder(engine.runner.model.visual, lambda: encode(batch[:1]), device)
    return EngineImages(dtype_name(engine.dtype), Samples(cold[1:]), Samples(hit[1:]), cached_tokens,
                        Samples(rates[False]), Samples(rates[True]), profile)


def transformers_images(model_path: str, dtype: torch.dtype, device: torch.device, image_token_id: int,
                        prompts: list[TokenizedPrompt]) -> BaselineImages:
    """The forward over each whole prompt, encoder included, to the first token's logits; the first warms up."""
    model = AutoModelForImageTextToText.from_pretrained(model_path, dtype=dtype).to(device).eval()

    def first_token(prompt: TokenizedPrompt) -> None:
        image = prompt.multi_modal.images[0]
        input_ids = torch.tensor([prompt.token_ids], device=device)
        with torch.inference_mode():
            # The processor's marks of image tokens, from which transformers lays out the rotary positions.
            logits = model(input_ids=input_ids, mm_token_type_ids=(input_ids == image_token_id).long(),
                           pixel_values=image.pixel_values.to(device),
                           image_grid_thw=torch.tensor([image.grid_thw], device=device), logits_to_keep=1).logits
            logits[0, -1].argmax().item()

    seconds = [timed_seconds(lambda: first_token(prompt), device) for prompt in prompts][1:]
    return BaselineImages(dtype_name(model.dtype), Samples(seconds))


def run_images(settings: ImagesSettings) -> ImagesRun:
    llm = bench_llm(settings.config)
    if llm.engine.model_config.vision is None:
        raise ValueError(f"{llm.engine.model_path} is a text-only model; images needs a vision-language checkpoint "
                         "such as GLM-4.1V (bench make-model --shape glm4v-tiny)")
    inputs = screenshot_inputs(llm, settings)
    shapes = model_shapes(llm.engine.model_config)
    engine = engine_images(llm, inputs, settings)
    model_path, device = llm.engine.model_path, llm.engine.device
    image_token_id = llm.engine.model_config.vision.image_token_id
    dtype = resolve_dtype(settings.config.dtype, llm.engine.model_config)
    del llm
    gc.collect()
    baseline = None
    if settings.baseline == "transformers":
        baseline = transformers_images(str(model_path), dtype, device, image_token_id, inputs.prompts)
    return ImagesRun(shapes, inputs, engine, baseline)
