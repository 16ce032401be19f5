"""Everything an engine needs before its first step: device, weights, tokenizer, KV pool."""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from autoglm.model_paths import resolve_model_path
from autoglm.attention.kv_cache_format import KVCacheFormat
from autoglm.config import EngineConfig
from autoglm.config.chat_template import read_chat_template
from autoglm.distributed.pipeline_state import busiest_stage_bytes
from autoglm.models import ModelConfig
from autoglm.models.linear_method import LinearMethods
from autoglm.models.partition import partition_model
from autoglm.host_allocator import keep_freed_memory_for_reuse
from autoglm.platforms import device_memory, resolve_device
from autoglm.engine.pipeline_parallel.checks import check_pipeline_split
from autoglm.engine.pipeline_parallel.layout import engine_rank
from autoglm.engine.pipeline_parallel.pipeline_runner import PipelineRunner
from autoglm.engine.rank_model import load_rank_model
from autoglm.engine.tensor_parallel.parallel_runner import TensorParallelRunner
from autoglm.engine.tensor_parallel.process_group import group_settings, rank_device, rank_threads
from autoglm.engine.tensor_parallel.worker_group import WorkerGroup
from autoglm.engine.torch_threads import claim_num_threads
from autoglm.runner.kv_cache import bytes_per_block
from autoglm.runner.memory_profile import fit_kv_budget, step_reserve_bytes
from autoglm.runner.model_runner import ModelRunner
from autoglm.runner.padded_decode import decode_graph_settings

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
    runner: ModelRunner | TensorParallelRunner | PipelineRunner
    kv_bytes_per_token: float = 0.0  # of this rank's heads, scales included; 0 where a test fakes the runner
    linear_methods: LinearMethods = field(default_factory=LinearMethods)
    workers: WorkerGroup | None = None  # the other ranks under tensor or pipeline parallelism


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


def _num_blocks(config: EngineConfig, model, num_layers: int, dtype: torch.dtype, device: torch.device,
                max_context_len: int, kv_format: KVCacheFormat, reserve: int) -> int:
    """Blocks in the budget, leaving ``reserve`` bytes (the profiled steps' need) free on an accelerator. Under
    pipeline parallelism every stage holds as many blocks, of its own layers: as many as fit the stage of most."""
    per_block = busiest_stage_bytes(bytes_per_block(model, config.cache.block_size, dtype, kv_format), num_layers)
    memory = device_memory(device)
    full_need = config.scheduler.max_num_seqs * -(-max_context_len // config.cache.block_size) * per_block
    budget = fit_kv_budget(config.cache.kv_cache_bytes(memory[1] if memory else None), memory[0] if memory else None,
                           reserve, full_need)
    num_blocks = budget // per_block
    if num_blocks < 1:
        raise ValueError(f"kv_cache_memory of {budget} bytes holds no block; one block needs {per_block} bytes")
    return num_blocks


def build_engine_parts(config: EngineConfig) -> EngineParts:
    """Each stage logs at INFO, so a command line shows what a slow start is doing."""
    started = time.perf_counter()
    scheduler = config.scheduler
    if not scheduler.enable_chunked_prefill and scheduler.max_num_batched_tokens < config.model.max_context_len:
        raise ValueError(
            f"with enable_chunked_prefill off, max_num_batched_tokens ({scheduler.max_num_batched_tokens}) must be "
            f"at least max_context_len ({config.model.max_context_len}) so that any prompt fits in one step"
        )
    device = resolve_device(config.device.device)
    parallel = config.parallel
    workers = _start_workers(config, device) if parallel.tensor_parallel_size * parallel.pipeline_parallel_size > 1 \
        else None
    if workers is not None:
        device = rank_device(workers.settings, engine_rank(workers.settings))
    num_threads = config.device.num_threads
    claim_num_threads(rank_threads(num_threads, workers.settings) if workers else num_threads)
    if device.type == "cpu":
        keep_freed_memory_for_reuse()
    try:
        rank = load_rank_model(config, device)
        tokenizer_path = str(config.model.tokenizer or rank.model_path)
        logger.info("loading the tokenizer from %s", tokenizer_path)
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        if config.model.chat_template is not None:
            logger.info("chat template from %s, instead of the tokenizer's", config.model.chat_template)
            tokenizer.chat_template = read_chat_template(config.model.chat_template)
        max_context_len = config.model.max_context_len
        model_config = rank.model_config
        if model_config.max_position_embeddings and max_context_len > model_config.max_position_embeddings:
            max_context_len = model_config.max_position_embeddings
            logger.info("max_context_len lowered to the model's max_position_embeddings (%d)", max_context_len)
        eos_token_ids = collect_eos_token_ids(rank.model_path, model_config, tokenizer)
        # Tensor- and pipeline-parallel ranks replay no graphs yet: their steps wait on communication issued from
        # Python.
        graphs = None if workers else decode_graph_settings(rank.device, config.device.enforce_eager,
                                                            scheduler.max_num_seqs, max_context_len,
                                                            config.cache.block_size)
        # A parallel rank cannot run a forward alone (its peers wait in collectives, or send its input): no profile run.
        reserve = 0 if workers else step_reserve_bytes(rank.model, rank.device, scheduler.max_num_batched_tokens,
                                                       scheduler.max_num_seqs, graphs is not None)
        num_blocks = _num_blocks(config, rank.model, model_config.num_hidden_layers, rank.dtype, rank.device,
                                 max_context_len, rank.kv_format, reserve)
        runner = rank.runner(config.cache.block_size, num_blocks, graphs)
        if workers is not None:
            workers.share(num_blocks)  # the block tables are the same on every rank
    except BaseException:
        if workers is not None:
            workers.close()
        raise
    logger.info("KV cache holds %d tokens (kv_cache_dtype %s); engine ready in %.1f s",
                num_blocks * config.cache.block_size, rank.kv_format.name, time.perf_counter() - started)
    return EngineParts(rank.model_path, model_config, tokenizer, rank.device, rank.dtype, max_context_len,
                       eos_token_ids, num_blocks, _parallel_runner(runner, workers, parallel.pipeline_parallel_size),
                       runner.kv_pool.bytes_per_token, rank.linear_methods, workers)


def _parallel_runner(runner: ModelRunner, workers: WorkerGroup | None,
                     num_stages: int) -> ModelRunner | TensorParallelRunner | PipelineRunner:
    if workers is None:
        return runner
    return PipelineRunner(runner, workers) if num_stages > 1 else TensorParallelRunner(runner, workers)


def check_tensor_parallel_split(config: EngineConfig) -> None:
    """A ValueError naming the model's dimension that tensor_parallel_size does not divide (or the experts it cannot
    share out under enable_expert_parallel), read from the checkpoint's config alone, so that a command can refuse
    the settings before it starts anything."""
    size = config.parallel.tensor_parallel_size
    if config.parallel.pipeline_parallel_size > 1:
        check_pipeline_split(config, ModelConfig.from_pretrained(resolve_model_path(config.model.model)))
    if size > 1:
        model_config = ModelConfig.from_pretrained(resolve_model_path(config.model.model))
        partition_model(model_config, 0, size, config.parallel.enable_expert_parallel)


def _start_workers(config: EngineConfig, device: torch.device) -> WorkerGroup:
    """Check that the model splits across the ranks (before anything starts), then start the workers."""
    parallel = config.parallel
    check_tensor_parallel_split(config)
    settings = group_settings(parallel.distributed_backend, device,
                              parallel.tensor_parallel_size * parallel.pipeline_parallel_size,
                              parallel.enable_expert_parallel)
    settings = replace(settings, pipeline_parallel_size=parallel.pipeline_parallel_size)
    logger.info("starting %d worker process(es): %d pipeline stage(s) of %d tensor-parallel rank(s) (%s%s)",
                settings.world_size - 1,
                parallel.pipeline_parallel_size, parallel.tensor_parallel_size, settings.backend,
                ", experts shared out whole" if settings.expert_parallel else "")
    return WorkerGroup.start(config, settings)
