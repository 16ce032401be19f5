"""The engine's side of a benchmark: a whole workload through ``LLM.generate``."""
from __future__ import annotations

import time
from statistics import mean, median

from autoglm.bench.lib.sampling import BenchSampling
from autoglm.bench.lib.workloads import Workload, usable_token_ids
from autoglm.bench.results.report import dtype_name
from autoglm.bench.results.roofline import WeightFormat
from autoglm.bench.results.throughput import EngineThroughputResult
from autoglm.config import AutoGLMConfig
from autoglm.engine.llm_engine import LLMEngine
from autoglm.llm import LLM
from autoglm.progress import show_progress

ENGINE_SIDE, BASELINE_SIDE = "autoglm", "transformers"  # how results name the two sides


def bench_llm(config: AutoGLMConfig) -> LLM:
    """An LLM to measure: on the CPU, like every ``LLM``, it waits for the compiled kernels before its first
    step, where a server would serve without them meanwhile."""
    return LLM.from_config(config)


def decode_weight_format(engine: LLMEngine) -> WeightFormat:
    """What the engine's decode steps read: the projections' weights (with their group size when
    quantized) and the LM head's, which quantization leaves in float unless ``quantize_lm_head``."""
    methods = engine.linear_methods
    int_format = getattr(methods.layers, "weight_format", None)
    return WeightFormat(dtype_name(methods.layers.decode_weight_dtype(engine.dtype)),
                        None if int_format is None else int_format.group_size,
                        dtype_name(methods.lm_head.decode_weight_dtype(engine.dtype)))


def run_engine_workload(llm: LLM, workload: Workload, sampling: BenchSampling = BenchSampling()
                        ) -> EngineThroughputResult:
    """Submit every request at once, ignoring EOS, and time until the last finishes.

    Counters are taken as differences, so one ``llm`` can run several workloads in turn; a
    profiling engine starts the workload with its profile cleared.
    """
    profiler = llm.engine.profiler
    profiler.reset()
    prompts = [request.prompt_token_ids for request in workload.requests]
    params = [sampling.engine_params(request.max_tokens) for request in workload.requests]
    before = llm.engine.get_stats()
    start = time.perf_counter()
    outputs = llm.generate(prompts, params, use_tqdm=show_progress())
    elapsed_s = time.perf_counter() - start
    after = llm.engine.get_stats()
    workload.check_output_lengths([len(output.outputs[0].token_ids) for output in outputs], "the engine")
    cache_queries = after.prefix_cache_queries - before.prefix_cache_queries
    cache_hits = after.prefix_cache_hits - before.prefix_cache_hits
    ttfts = [output.metrics.first_token_time - output.metrics.arrival_time for output in outputs]
    return EngineThroughputResult(
        num_requests=len(workload.requests),
        prompt_tokens=workload.prompt_tokens,
        output_tokens=workload.output_tokens,
        elapsed_s=elapsed_s,
        mean_ttft_s=mean(ttfts),
        median_ttft_s=median(ttfts),
        num_preemptions=after.num_preemptions - before.num_preemptions,
        prefix_cache_hit_rate=cache_hits / cache_queries if cache_queries else 0.0,
        compute_dtype=dtype_name(llm.engine.dtype),
        profile=profiler.result(),
        weights=decode_weight_format(llm.engine).label,
        kv_cache_dtype=llm.engine.config.cache.kv_cache_dtype,
    )


def prompt_token_ids(engine: LLMEngine) -> list[int]:
    """Ids both the model and its tokenizer know, without special ones."""
    tokenizer = engine.tokenizer
    special = {*tokenizer.all_special_ids, *engine.eos_token_ids}
    if engine.model_config.bos_token_id is not None:
        special.add(engine.model_config.bos_token_id)
    return usable_token_ids(min(len(tokenizer), engine.model_config.vocab_size), special)
