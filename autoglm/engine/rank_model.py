"""One process's model: its weights loaded on its device, with what its KV cache and runner are built from.

Every tensor-parallel rank builds its own this way (its shard, once the process has joined its
group); a single-process engine is rank 0 of one.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from autoglm.attention import select_attention_backend
from autoglm.attention.kv_cache_format import KVCacheFormat, check_kv_cache_format, kv_cache_format
from autoglm.config import EngineConfig
from autoglm.engine.pooling.model_kind import engine_pools
from autoglm.kernels.cpu_extension import start_cpu_kernel_build
from autoglm.model_paths import resolve_model_path
from autoglm.models import ModelConfig, load_model, resolve_dtype
from autoglm.models.linear_method import (
    ALL_ROWS,
    LinearMethods,
    WeightQuantization,
    linear_methods_for,
    row_limit_for,
    with_int_weights,
)
from autoglm.models.lora import enable_lora
from autoglm.models.pooling_models import pooling_model_class
from autoglm.models.parameter_count import count_active_parameters, count_parameters
from autoglm.platforms import compute_dtype
from autoglm.runner.model_runner import ModelRunner
from autoglm.runner.padded_decode import PaddedDecodeSettings

logger = logging.getLogger(__name__)


@dataclass
class RankModel:
    model_path: Path
    model_config: ModelConfig
    model: nn.Module
    device: torch.device
    dtype: torch.dtype  # what weights and KV are computed in
    kv_format: KVCacheFormat
    linear_methods: LinearMethods
    every_query_alone: bool  # each token computed as it would be alone: cpu_kernel_max_rows 'all'

    def runner(self, block_size: int, num_blocks: int,
               padded_decode: PaddedDecodeSettings | None = None) -> ModelRunner:
        backend = select_attention_backend(self.device, self.dtype, self.every_query_alone)
        return ModelRunner(self.model, self.device, self.dtype, block_size, num_blocks, self.model_config.vocab_size,
                           backend, kv_format=self.kv_format, padded_decode=padded_decode)


def load_rank_model(config: EngineConfig, device: torch.device) -> RankModel:
    kv_format = kv_cache_format(config.cache.kv_cache_dtype)
    check_kv_cache_format(kv_format, device)  # before minutes of loading
    model_path = resolve_model_path(config.model.model)
    model_config = ModelConfig.from_pretrained(model_path)
    requested_dtype = resolve_dtype(config.model.dtype, model_config)
    dtype = compute_dtype(requested_dtype, device, config.device.cpu_upcast_half)
    if dtype != requested_dtype:
        logger.warning("this CPU has no %s matrix instructions: computing in float32 (cpu_upcast_half=false "
                       "keeps half precision, emulated and slower)", str(requested_dtype).removeprefix("torch."))
    # Never waits: a first start builds the kernels in the background while plain PyTorch serves.
    kernels_coming = device.type == "cpu" and start_cpu_kernel_build()
    quantization = WeightQuantization.from_settings(config.model.quantization, config.model.quantization_group_size,
                                                    config.model.quantize_lm_head)
    # A batch of one verifies its decode token and its proposals on the path its decode steps take.
    spec = config.speculative
    verification_rows = 1 + spec.num_speculative_tokens if spec is not None else 0
    row_limit = row_limit_for(config.device.cpu_kernel_max_rows, verification_rows)
    linear_methods = linear_methods_for(device, dtype, requested_dtype, config.device.cpu_linear_kernel, row_limit,
                                        kernels_coming)
    linear_methods = with_int_weights(linear_methods, model_config, quantization, dtype, requested_dtype)
    layers, lm_head = linear_methods.layers.describe(dtype), linear_methods.lm_head.describe(dtype)
    logger.info("loading %s from %s on %s, computing in %s: %d layers of %s; LM head: %s", model_config.architecture,
                model_path, device, str(dtype).removeprefix("torch."), model_config.num_hidden_layers, layers,
                "the same" if lm_head == layers else lm_head)
    pooling_class = (pooling_model_class(model_config.architecture, config.pooling.classifier_from_token is not None)
                     if engine_pools(config.pooling, model_path, model_config) else None)
    model, model_config = load_model(model_path, dtype, device, model_config, linear_methods, pooling_class)
    if config.lora.enable_lora:
        enable_lora(model, config.lora.max_loras, config.lora.max_lora_rank, dtype, device)
    if device.type == "cpu" and hasattr(model, "enable_native_decode"):
        model.enable_native_decode(config.device.cpu_decode_step_max_rows)
    total, active = count_parameters(model), count_active_parameters(model)
    logger.info("%.1fM parameters loaded%s", total / 1e6,
                f", {active / 1e6:.1f}M of them active per token" if active != total else "")
    return RankModel(model_path, model_config, model, device, dtype, kv_format, linear_methods,
                     config.device.cpu_kernel_max_rows == ALL_ROWS)
