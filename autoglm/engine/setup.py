"""Everything an engine needs before its first step: device, weights, tokenizer, KV pool."""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from autoglm.model_paths import resolve_model_path
from autoglm.attention.kv_cache_format import KVCacheFormat, check_kv_cache_format, kv_cache_format
from autoglm.config import AutoGLMConfig
from autoglm.models import ModelConfig, load_model, resolve_dtype
from autoglm.models.linear_method import LinearMethods, WeightQuantization, linear_methods_for, with_int_weights
from autoglm.platforms import compute_dtype, device_memory, resolve_device
from autoglm.engine.torch_threads import claim_num_threads
from autoglm.kernels.cpu_extension import start_cpu_kernel_build
from autoglm.runner.kv_cache import bytes_per_block, default_kv_bytes
from autoglm.runner.model_runner import ModelRunner

logger = logging.getLogger(__name__)


@dataclass
class EngineParts:
    model_path: Path
    model_config: ModelConfig
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    dtype: torch.dtype
    max_context_len: int
    eos_token_ids: set[int]
    num_blocks: int
    runner: ModelRunner
    kv_bytes_per_token: float = 0.0  # of the whole model, scales included; 0 where a test fakes the runner
    linear_methods: LinearMethods = field(default_factory=LinearMethods)


def collect_eos_token_ids(model_path: Path, model_config: ModelConfig, tokenizer) -> set[int]:
    """End-of-sequence ids from the model config, generation_config.json and the tokenizer."""
    ids = set(model_config.eos_token_ids)
    generation_config = model_path / "generation_config.json"
    if generation_config.exists():
        eos = json.loads(generation_config.read_text()).get("eos_token_id")
        ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


def _num_blocks(config: AutoGLMConfig, model, dtype: torch.dtype, device: torch.device,
                max_context_len: int, kv_format: KVCacheFormat) -> int:
    per_block = bytes_per_block(model, config.block_size, dtype, kv_format)
    memory = device_memory(device)
    budget = config.kv_cache_bytes(memory[1] if memory else None)
    if budget is None:
        full_need = config.max_num_seqs * -(-max_context_len // config.block_size) * per_block
        budget = default_kv_bytes(memory[0] if memory else None, full_need)
    num_blocks = budget // per_block
    if num_blocks < 1:
        raise ValueError(f"kv_cache_memory of {budget} bytes holds no block; one block needs {per_block} bytes")
    return num_blocks


def build_engine_parts(config: AutoGLMConfig) -> EngineParts:
    """Each stage logs at INFO, so a command line shows what a slow start is doing."""
    started = time.perf_counter()
    claim_num_threads(config.num_threads)
    if not config.enable_chunked_prefill and config.max_num_batched_tokens < config.max_context_len:
        raise ValueError(
            f"with enable_chunked_prefill off, max_num_batched_tokens ({config.max_num_batched_tokens}) must be "
            f"at least max_context_len ({config.max_context_len}) so that any prompt fits in one step"
        )
    device = resolve_device(config.device)
    kv_format = kv_cache_format(config.kv_cache_dtype)
    check_kv_cache_format(kv_format, device)  # before minutes of loading
    model_path = resolve_model_path(config.model)
    model_config = ModelConfig.from_pretrained(model_path)
    requested_dtype = resolve_dtype(config.dtype, model_config)
    dtype = compute_dtype(requested_dtype, device, config.cpu_upcast_half)
    if dtype != requested_dtype:
        logger.warning("this CPU has no %s matrix instructions: computing in float32 (cpu_upcast_half=false "
                       "keeps half precision, emulated and slower)", requested_dtype)
    # Never waits: a first start builds the kernels in the background while plain PyTorch serves.
    kernels_coming = device.type == "cpu" and start_cpu_kernel_build()
    quantization = WeightQuantization.from_settings(config.quantization, config.quantization_group_size,
                                                    config.quantize_lm_head)
    max_rows = None if config.cpu_kernel_max_rows == "auto" else config.cpu_kernel_max_rows
    linear_methods = linear_methods_for(device, dtype, requested_dtype, config.cpu_linear_kernel, max_rows,
                                        kernels_coming)
    linear_methods = with_int_weights(linear_methods, model_config, quantization, dtype, requested_dtype)
    logger.info("loading %s weights from %s as %s on %s; projections: %s, LM head: %s", model_config.architecture,
                model_path, str(dtype).removeprefix("torch."), device, linear_methods.layers.describe(),
                linear_methods.lm_head.describe())
    model, model_config = load_model(model_path, dtype, device, model_config, linear_methods)
    logger.info("%.1fM parameters loaded", sum(parameter.numel() for parameter in model.parameters()) / 1e6)
    tokenizer_path = str(config.tokenizer or model_path)
    logger.info("loading the tokenizer from %s", tokenizer_path)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    max_context_len = config.max_context_len
    if model_config.max_position_embeddings and max_context_len > model_config.max_position_embeddings:
        max_context_len = model_config.max_position_embeddings
        logger.info("max_context_len lowered to the model's max_position_embeddings (%d)", max_context_len)
    eos_token_ids = collect_eos_token_ids(model_path, model_config, tokenizer)
    num_blocks = _num_blocks(config, model, dtype, device, max_context_len, kv_format)
    runner = ModelRunner(model, device, dtype, config.block_size, num_blocks, model_config.vocab_size,
                         kv_format=kv_format)
    logger.info("KV cache holds %d tokens (kv_cache_dtype %s); engine ready in %.1f s", num_blocks * config.block_size,
                kv_format.name, time.perf_counter() - started)
    return EngineParts(model_path, model_config, tokenizer, device, dtype, max_context_len, eos_token_ids,
                       num_blocks, runner, runner.kv_pool.bytes_per_token, linear_methods)
