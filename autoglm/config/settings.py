"""The settings users give, as one flat validated object: what files, environment variables, flags and
``LLM(**kwargs)`` fill (see sources.py), split into the engine's and the server's views (engine.py, server.py)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import fields
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from autoglm.config.chat_template import read_chat_template
from autoglm.config.engine import (
    CacheConfig,
    DeviceConfig,
    EngineConfig,
    LoRAConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from autoglm.config.server import (
    AdaptersConfig,
    ChatConfig,
    HttpConfig,
    MediaConfig,
    RayConfig,
    ResponseCacheConfig,
    ServerConfig,
    StorageConfig,
    TenantsConfig,
    VersionsConfig,
    check_image_processor_kwargs,
    parse_lora_modules,
)
from autoglm.config.sources import (
    ARGUMENT_SOURCE,
    DEFAULTS_SOURCE,
    ConfigError,
    SourcedSettings,
    env_settings,
    read_settings_file,
)
from autoglm.config.pooling import PoolingConfig
from autoglm.config.speculative import SpeculativeConfig, parse_speculative_config

_Part = TypeVar("_Part")
# Other engines' names for our settings, accepted so their config files carry over.
SETTING_ALIASES = {"max_model_len": "max_context_len"}

_DTYPE_ALIASES = {
    "fp32": "float32",
    "float": "float32",
    "bf16": "bfloat16",
    "fp16": "float16",
    "half": "float16",
}
# vLLM's name for the e4m3 float8 cache.
_KV_CACHE_DTYPE_ALIASES = {"fp8": "fp8_e4m3"}
_REDIS_URL_PATTERN = re.compile(r"rediss?://[^\s/]+(/\d+)?")
_DEVICE_PATTERN = re.compile(r"auto|cpu|mps|(cuda|xpu)(:\d+)?")
_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_BYTE_SIZE_PATTERN = re.compile(r"(?P<number>\d+(\.\d*)?|\.\d+)\s*(?P<unit>[a-z]*)", re.IGNORECASE)
_FRACTION_PATTERN = re.compile(r"\d+\.\d*|\.\d+")
_KV_CACHE_MEMORY_EXPECTED = (
    "expected 'auto', a byte count (4096, '512MiB', '2GiB', '1.5GB') "
    "or a fraction of device memory greater than 0 and at most 1 (0.9)"
)


class SettingGroup(str, Enum):
    """What a setting affects; the command line lists its flags under these headings, in this order."""

    MODEL = "model"
    DEVICE = "device"
    CACHE = "KV cache"
    SCHEDULING = "scheduling"
    SERVER = "server"
    MEDIA = "images"
    TENANTS = "tenants"
    RESPONSE_CACHE = "response cache"
    VERSIONS = "model versions"
    STORAGE = "stored responses, files and batches"
    RAY = "Ray Serve"  # read only by `autoglm serve --ray` and the Ray Serve application builder


# Each field's metadata names its group: Field(..., json_schema_extra=_CACHE); where its type does not say what a
# flag takes, also the placeholder `--help` shows: json_schema_extra={**_MODEL, "metavar": "FOLDER"}.
_MODEL = {"group": SettingGroup.MODEL.value}
_DEVICE = {"group": SettingGroup.DEVICE.value}
_CACHE = {"group": SettingGroup.CACHE.value}
_SCHEDULING = {"group": SettingGroup.SCHEDULING.value}
_SERVER = {"group": SettingGroup.SERVER.value}
_MEDIA = {"group": SettingGroup.MEDIA.value}
_TENANTS = {"group": SettingGroup.TENANTS.value}
_RESPONSE_CACHE = {"group": SettingGroup.RESPONSE_CACHE.value}
_VERSIONS = {"group": SettingGroup.VERSIONS.value}
_STORAGE = {"group": SettingGroup.STORAGE.value}
_RAY = {"group": SettingGroup.RAY.value}
# Groups only a server reads; other commands leave their flags out.
SERVER_GROUPS = (SettingGroup.SERVER, SettingGroup.MEDIA, SettingGroup.TENANTS, SettingGroup.RESPONSE_CACHE, SettingGroup.VERSIONS,
                 SettingGroup.STORAGE, SettingGroup.RAY)


def parse_byte_size(text: str) -> int:
    """Turn a size like '2GiB', '1.5 GB' or '4096' into bytes (KiB = 1024 B, KB = 1000 B)."""
    match = _BYTE_SIZE_PATTERN.fullmatch(text.strip())
    if match is None:
        raise ConfigError(f"cannot read {text!r} as a size; expected a number and a unit, like '2GiB' or '4096'")
    unit = match["unit"].lower()
    if unit not in _BYTE_UNITS:
        allowed = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
        raise ConfigError(f"unknown size unit {match['unit']!r} in {text!r}; allowed units: {allowed}")
    size = Decimal(match["number"]) * _BYTE_UNITS[unit]
    if size != size.to_integral_value():
        raise ConfigError(f"{text!r} is not a whole number of bytes")
    return int(size)


class AutoGLMConfig(BaseModel):
    """Every setting of the engine and server, validated once where it is read."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = Field(
        None, description="Checkpoint folder in Hugging Face format; unset: the embedded default model.",
        json_schema_extra={**_MODEL, "metavar": "FOLDER"},
    )
    tokenizer: str | None = Field(
        None, description="Tokenizer folder; unset: the model folder.",
        json_schema_extra={**_MODEL, "metavar": "FOLDER"},
    )
    served_model_name: str | None = Field(
        None,
        description=("Model name the API reports and accepts in a request's model field; unset: the checkpoint "
                     "folder's own name (never its path)."),
        json_schema_extra={**_SERVER, "metavar": "NAME"},
    )
    chat_template: str | None = Field(
        None, description="Jinja chat template file to use instead of the tokenizer's own (vLLM's --chat-template).",
        json_schema_extra={**_MODEL, "metavar": "FILE"},
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description=(
            "Weight and activation dtype: 'auto' (the checkpoint's own), float32, bfloat16 or float16; also accepts "
            "fp32, float, bf16, fp16 and half."
        ),
        json_schema_extra=_MODEL,
    )
    device: str = Field(
        "auto",
        description=(
            "'auto' (the accelerator PyTorch sees), 'cpu', 'cuda', 'cuda:N', 'xpu', 'xpu:N' or 'mps'; availability is "
            "checked later."
        ),
        json_schema_extra={**_DEVICE, "metavar": "DEVICE"},
    )
    cpu_upcast_half: bool = Field(
        True,
        description=(
            "On a CPU without bfloat16/float16 matrix instructions, run a bfloat16/float16 model in float32 "
            "(2-4x faster there, twice the weight and KV memory); false keeps half precision."
        ),
        json_schema_extra=_DEVICE,
    )
    cpu_linear_kernel: str = Field(
        "auto",
        description=(
            "Compiled kernel for steps of few rows of a bfloat16 model on the CPU: 'auto' (the fastest this CPU runs: "
            "bf16-dot-avx512 with AVX512-BF16, else bf16-weight-avx512 or bf16-weight-avx2 reading bfloat16 copies of "
            "the upcast float32 weights, the same float32 math from half the bytes), 'torch' (PyTorch's matmul only) "
            "or a kernel's name. Needs a C++ compiler (a one-time background build)."
        ),
        json_schema_extra={**_DEVICE, "metavar": "KERNEL"},
    )
    cpu_kernel_max_rows: Annotated[int, Field(ge=0)] | Literal["all", "auto"] = Field(
        "all",
        description=(
            "'all': every step takes the CPU linear kernel and every query the decode attention kernel, so each token "
            "is computed as it would be alone and greedy output does not depend on the batch; 'auto' or a number: "
            "steps of more rows than measured once per machine and weight shape (with speculative_config, at least 1 + "
            "num_speculative_tokens), or than that number, take PyTorch's matmul, and prompts PyTorch's attention: "
            "faster prompts whose last bits, and so greedy near-ties, vary with the batch."
        ),
        json_schema_extra=_DEVICE,
    )
    cpu_decode_step_max_rows: int = Field(
        64,
        ge=0,
        description=(
            "Decode steps of up to this many sequences run the whole model as one compiled call on a CPU with "
            "AVX-512 (the native decode step: its threads meet at barriers instead of PyTorch dispatching each op), "
            "bit-identical to the layer-by-layer forward; 0 runs every step layer by layer."
        ),
        json_schema_extra=_DEVICE,
    )
    enforce_eager: bool = Field(
        False,
        description=(
            "Run every step eagerly: no CUDA graphs for decode steps (captured at start on CUDA for batch sizes 1, 2, "
            "4, 8, 16, ... up to max_num_seqs, a batch padded to the next size, which costs start-up time and some "
            "device memory)."
        ),
        json_schema_extra=_DEVICE,
    )
    block_size: int = Field(16, ge=1, le=256, description="Tokens per KV cache block.", json_schema_extra=_CACHE)
    max_context_len: int = Field(
        8192,
        ge=1,
        description=(
            "Longest prompt plus output, in tokens, capped at the model's own limit; files may call it max_model_len."
        ),
        json_schema_extra=_MODEL,
    )
    kv_cache_memory: str | int | float = Field(
        "auto",
        description=(
            "KV cache budget: a byte count or size such as '2GiB' (stored as bytes), or a float in (0, 1] as a "
            "fraction of accelerator memory; 'auto' holds max_num_seqs full contexts, capped at 2 GiB on the CPU or at "
            "80% of the accelerator memory still free once a start-up profile run has set aside what the largest step "
            "and the decode graphs need (on CUDA a set budget that leaves less is refused)."
        ),
        json_schema_extra={**_CACHE, "metavar": "SIZE|FRACTION|auto"},
    )
    use_paged_attention: bool = Field(
        True,
        description="False reserves each sequence's whole context up front (contiguous), for comparison.",
        json_schema_extra=_CACHE,
    )
    max_num_seqs: int = Field(
        64, ge=1, description="Most sequences running in one step.", json_schema_extra=_SCHEDULING
    )
    max_num_seqs_per_tenant: int | None = Field(
        None,
        ge=1,
        description=(
            "Most sequences one tenant may have running at once, so that no tenant holds every slot; the "
            "rest of its work waits even while slots are free. Unset: no cap. Requests without a tenant "
            "(a server without keys, the offline LLM) are never capped."
        ),
        json_schema_extra=_SCHEDULING,
    )
    max_num_batched_tokens: int = Field(
        2048,
        ge=1,
        description="Most tokens in one forward pass: decodes first, then chunks of prompts.",
        json_schema_extra=_SCHEDULING,
    )
    # Declared after use_paged_attention: its validator reads that already-validated value.
    enable_prefix_caching: bool = Field(
        True,
        validate_default=True,
        description="Reuse cached KV blocks of shared prompt prefixes; always off without paged attention.",
        json_schema_extra=_CACHE,
    )
    kv_cache_dtype: Literal["auto", "int8", "fp8_e4m3", "fp8_e5m2"] = Field(
        "auto",
        description=(
            "How the KV cache stores keys and values: 'auto' in the compute dtype; 'int8' with a float32 scale per "
            "token and KV head; 'fp8_e4m3' (also 'fp8') or 'fp8_e5m2' unscaled, where the device converts to "
            "float8. 8 bits hold about twice the tokens of 16 in the same kv_cache_memory."
        ),
        json_schema_extra=_CACHE,
    )
    kv_offload_bytes: int = Field(
        0,
        ge=0,
        description=(
            "A second KV tier of this size ('8GiB') below the pool: prefix-cache blocks the pool evicts are copied "
            "there (pinned host memory beside an accelerator, a memory-mapped file on the CPU) and copied back on a "
            "later prefix hit instead of being recomputed. 0: off. Needs prefix caching; under tensor parallelism each "
            "rank keeps one of this size for its own heads."
        ),
        json_schema_extra={**_CACHE, "metavar": "SIZE"},
    )
    kv_disk_path: str | None = Field(
        None,
        description=(
            "A third KV tier: a folder of block files below the host tier, which takes its least recently used "
            "blocks; keyed by the model's checksum, dtypes, block size and rank as well as the prefix, so a "
            "restarted engine or another replica on the same folder reuses them; every tensor- or pipeline-parallel "
            "rank keeps files of its own. Needs kv_offload_bytes. Unset: none."
        ),
        json_schema_extra={**_CACHE, "metavar": "FOLDER"},
    )
    kv_disk_bytes: int = Field(
        10 * 1024**3,
        ge=1,
        description=(
            "Most bytes of block files in kv_disk_path, held by every engine writing there (least recently used "
            "files go first)."
        ),
        json_schema_extra={**_CACHE, "metavar": "SIZE"},
    )
    enable_chunked_prefill: bool = Field(
        True, description="Split long prompts across steps.", json_schema_extra=_SCHEDULING
    )
    async_scheduling: bool | Literal["auto"] = Field(
        "auto",
        description=(
            "Schedule and prepare each step while the device still runs the one before, its sampled tokens "
            "filled in on the device and copied back without waiting; 'auto' is on for CUDA, off elsewhere. "
            "Steps with a structured-output, prompt-logprobs or penalised request, and speculative decoding, "
            "run one at a time either way."
        ),
        json_schema_extra=_SCHEDULING,
    )
    scheduling_policy: Literal["priority", "fcfs"] = Field(
        "priority",
        description=(
            "Queue order inside each tenant: 'priority' (lower request priority first, aged so none starves; arrival "
            "order on ties) or 'fcfs' (arrival order, priorities ignored; vLLM's default, which agrees with 'priority' "
            "while requests keep priority 0). Tenants share the engine by weight (fair queuing over tokens served); "
            "without tenants this order is the whole order."
        ),
        json_schema_extra=_SCHEDULING,
    )
    max_abs_priority: int = Field(
        1000,
        ge=0,
        description=(
            "Largest priority magnitude a request may give: priorities outside [-N, N] are refused naming the bound "
            "(400 from the API, InvalidRequestError offline), so no client can jump every queue for longer than aging "
            "takes to catch up."
        ),
        json_schema_extra=_SCHEDULING,
    )
    num_threads: int | None = Field(
        None,
        ge=1,
        description=(
            "CPU threads for torch, per process (each tensor-parallel rank is one): the first engine of a process sets "
            "them, a later one asking for another count keeps them and warns. Unset keeps torch's choice, shared out "
            "among the ranks under tensor parallelism."
        ),
        json_schema_extra=_DEVICE,
    )
    tensor_parallel_size: int = Field(
        1, ge=1,
        description=(
            "Processes the model is split across, one rank each (this one and N-1 workers it starts), joined by "
            "torch.distributed; on an accelerator, one device per rank. Must divide the model's attention heads. A "
            "vision encoder runs whole on every rank, each encoding the step's images."
        ),
        json_schema_extra=_DEVICE,
    )
    pipeline_parallel_size: int = Field(
        1, ge=1,
        description=(
            "Pipeline stages the decoder's layers are split into, in contiguous runs (the first stages take one more "
            "where the stages do not divide the layers), each on tensor_parallel_size ranks of its own; this process "
            "is the last stage, which samples. Each stage loads and caches its own layers only, and the engine keeps "
            "one batch per stage in flight. At most the model's layer count; not with speculative decoding or LoRA "
            "adapters. A vision encoder runs on the first stage, which embeds the tokens."
        ),
        json_schema_extra=_DEVICE,
    )
    # Declared after tensor_parallel_size: its validator reads that already-validated value.
    enable_expert_parallel: bool = Field(
        False,
        description=(
            "For a mixture-of-experts model under tensor parallelism: each rank holds a contiguous share of the "
            "routed experts whole (uneven where tensor_parallel_size does not divide their count) instead of a slice "
            "of every expert; attention stays split by heads. Needs tensor_parallel_size above 1 and at most the "
            "model's expert count."
        ),
        json_schema_extra=_DEVICE,
    )
    distributed_backend: Literal["auto", "gloo", "nccl"] = Field(
        "auto",
        description="How tensor- and pipeline-parallel ranks exchange activations: 'auto' (nccl on CUDA, gloo "
                    "otherwise), "
                    "'gloo' (CPU, or CUDA through host copies) or 'nccl' (CUDA only).",
        json_schema_extra=_DEVICE,
    )
    seed: int = Field(
        0,
        description=(
            "Seed of the engine's own generator, for requests that do not give their own; two engines in one process "
            "disturb neither each other's sampling nor torch's global generator."
        ),
        json_schema_extra=_MODEL,
    )
    quantization: Literal["none", "int8", "int4", "w8a8", "w4a8"] = Field(
        "none",
        description=(
            "Quantize the projections' weights as they load, symmetric: int8 (one scale per output channel, or per "
            "quantization_group_size columns) or int4 (group-wise); activations stay in the compute dtype (W8A16, "
            "W4A16). w8a8 and w4a8 quantize the activations too, to int8 per token, for the integer kernel of CPUs "
            "with AVX512-VNNI (elsewhere the same math in PyTorch, slower): faster decode, another accuracy. A "
            "checkpoint already quantized (compressed-tensors) loads as it is stored; this must then be none or its "
            "own bit width."
        ),
        json_schema_extra=_MODEL,
    )
    quantization_group_size: int | None = Field(
        None,
        ge=1,
        description=(
            "Input columns sharing one scale; unset: per output channel for int8 and w8a8, 128 for int4, 32 for "
            "w4a8 (w8a8/w4a8: 32 or a multiple of 64). Must divide every quantized layer's input size, else loading "
            "names the layer and the sizes that would."
        ),
        json_schema_extra=_MODEL,
    )
    quantize_lm_head: bool = Field(
        False, description="Quantize the LM head too (embeddings never are).", json_schema_extra=_MODEL
    )
    enable_lora: bool = Field(
        False,
        description="Let requests name LoRA adapters of this model (LLM.generate's lora_request, a server's adapters).",
        json_schema_extra=_MODEL,
    )
    max_loras: int = Field(
        1, ge=1,
        description=(
            "LoRA adapters ready in the batch's format at once: a step runs rows of at most this many distinct "
            "adapters, and requests for others wait their turn."
        ),
        json_schema_extra=_MODEL,
    )
    max_lora_rank: int = Field(
        16, ge=1, le=64,
        description="Highest LoRA rank an adapter may have (up to 64); every adapter is computed at this rank.",
        json_schema_extra=_MODEL,
    )
    # Declared after max_loras: its validator reads that already-validated value.
    max_cpu_loras: int | None = Field(
        None, ge=1,
        description=(
            "LoRA adapters kept loaded in memory; loading one more unloads the least recently used idle one. "
            "Unset: max_loras."
        ),
        json_schema_extra=_MODEL,
    )
    # Declared after tensor_parallel_size: its validator reads that already-validated value.
    speculative_config: SpeculativeConfig | None = Field(
        None,
        description=(
            "Speculative decoding, as a mapping or its JSON text: {\"method\": \"ngram\" | \"draft_model\" | \"mtp\", "
            "\"num_speculative_tokens\": K, \"prompt_lookup_min\": 2, \"prompt_lookup_max\": 4, \"model\": "
            "DRAFT_FOLDER}; outputs are the same as without it. Unset: off."
        ),
        json_schema_extra={**_MODEL, "metavar": "JSON"},
    )
    runner: Literal["auto", "generate", "pooling"] = Field(
        "auto",
        description=(
            "'generate' continues prompts; 'pooling' turns each prompt into a vector (embeddings, classifier logits, "
            "relevance scores). 'auto' pools for a *ForSequenceClassification checkpoint, one whose folder holds "
            "sentence-transformers' modules.json or 1_Pooling/config.json, or one whose config names an embedding "
            "model, and when classifier_from_token is set; else it generates."
        ),
        json_schema_extra=_MODEL,
    )
    pooling_type: Literal["LAST", "MEAN", "CLS"] | None = Field(
        None,
        description=(
            "How a pooling model makes one vector of a prompt's hidden states: the last token's, their mean, or the "
            "first token's. Unset: the checkpoint's 1_Pooling/config.json, else LAST. Classifiers always read the last."
        ),
        json_schema_extra=_MODEL,
    )
    normalize: bool = Field(
        True, description="Scale embeddings to unit length unless a request says otherwise.", json_schema_extra=_MODEL
    )
    classifier_from_token: tuple[str, ...] | None = Field(
        None,
        description=(
            "Two tokens, such as 'no,yes': score a causal LM's pair as the logit of the second minus that of the "
            "first at the prompt's last token (Qwen3-Reranker's form; the score is its sigmoid). Unset: off."
        ),
        json_schema_extra={**_MODEL, "metavar": "NO,YES"},
    )
    matryoshka_dimensions: tuple[int, ...] | None = Field(
        None,
        description=(
            "Embedding sizes a request's `dimensions` may ask for (the first N values, then normalised). "
            "Unset: the checkpoint config's matryoshka_dimensions; without either, `dimensions` is refused."
        ),
        json_schema_extra={**_MODEL, "metavar": "N,N"},
    )
    max_pooling_inputs: int = Field(
        2048,
        ge=1,
        description="Most inputs one embeddings, score or rerank request may hold.",
        json_schema_extra=_MODEL,
    )
    host: str = Field(
        "127.0.0.1",
        description="Address `autoglm serve` listens on.",
        json_schema_extra={**_SERVER, "metavar": "ADDRESS"},
    )
    port: int = Field(
        8000,
        ge=1,
        le=65535,
        description="Port `autoglm serve` listens on.",
        json_schema_extra={**_SERVER, "metavar": "PORT"},
    )
    max_waiting_requests: int = Field(
        256, ge=1, description="Queued requests beyond which the server answers 429.", json_schema_extra=_SERVER
    )
    request_timeout_s: float = Field(
        600.0,
        gt=0,
        description="Seconds before an unfinished request is aborted and ends with an error.",
        json_schema_extra=_SERVER,
    )
    engine_stall_timeout_s: float = Field(
        120.0,
        gt=0,
        description=(
            "Seconds an engine may have work yet end no step before /health answers 503 (engine_stalled, naming the "
            "model and for how long)."
        ),
        json_schema_extra=_SERVER,
    )
    drain_timeout_s: float = Field(
        30.0,
        ge=0,
        description="Seconds a stopping server (SIGTERM) lets running requests finish.",
        json_schema_extra=_SERVER,
    )
    log_stats_interval_s: float = Field(
        10.0,
        gt=0,
        description="Seconds between engine statistics log lines while the engine is busy.",
        json_schema_extra=_SERVER,
    )
    max_request_body_bytes: int = Field(
        2 * 1024**2,
        ge=1,
        description=(
            "Largest request body, in bytes or a size such as '2MiB'; a larger one is answered 413 without being read."
        ),
        json_schema_extra=_SERVER,
    )
    header_read_timeout_s: float = Field(
        10.0,
        gt=0,
        description=(
            "Seconds a client has to send a request's headers, from its first byte (a new connection's first request: "
            "from when it opens); then the connection is closed."
        ),
        json_schema_extra=_SERVER,
    )
    body_read_timeout_s: float = Field(
        30.0,
        gt=0,
        description=(
            "Seconds a client has to send a request's body, from its headers; then 408 and the connection is closed. A "
            "streamed response is not timed."
        ),
        json_schema_extra=_SERVER,
    )
    max_connections: int = Field(
        512, ge=1, description="Open connections past which a new one is answered 503 and closed.",
        json_schema_extra=_SERVER,
    )
    allowed_hosts: tuple[str, ...] | None = Field(
        None,
        description=(
            "Host header names the server answers to ('*' for any, '*.example.com' for subdomains; a list, or "
            "comma-separated in flags and variables), others getting 400; unset: a server bound to a loopback address "
            "answers only to localhost, 127.0.0.1 and [::1] (any port), one bound elsewhere to any name."
        ),
        json_schema_extra={**_SERVER, "metavar": "HOSTS"},
    )
    cors_allowed_origins: tuple[str, ...] = Field(
        (),
        description=(
            "Browser origins allowed to call the API ('*' for any); empty: no CORS headers, preflights refused: "
            "CORS off."
        ),
        json_schema_extra={**_SERVER, "metavar": "ORIGINS"},
    )
    enable_api_docs: bool = Field(
        True,
        description=(
            "Serve the /docs and /redoc pages (they load scripts from a CDN); /openapi.json is served either way."
        ),
        json_schema_extra=_SERVER,
    )
    tokenizer_workers: int = Field(
        2,
        ge=1,
        description=(
            "Threads that tokenize and detokenize requests, each with its own tokenizer, so that a long prompt stalls "
            "neither the event loop nor the engine."
        ),
        json_schema_extra=_SERVER,
    )
    tenants_file: str | None = Field(
        None,
        description=(
            "YAML file of tenants (role admin, user or reader, the models each may use, limits, weight) and the "
            "SHA-256 hashes of their API keys, made with `autoglm keys create` and read again on SIGHUP or POST "
            "/admin/reload; /v1/* and the tokenizer routes then need 'Authorization: Bearer KEY' or "
            "'x-api-key: KEY' (401 without a valid one, 403 outside the tenant's role or models) and /admin/* an "
            "admin key, while /health and /metrics stay "
            "open. Unset, with no api_key either: the server is open to anyone who reaches it, and says so at start."
        ),
        json_schema_extra={**_TENANTS, "metavar": "FILE"},
    )
    api_key: str | None = Field(
        None,
        description=(
            "One API key every request must carry, as vLLM's --api-key, for one admin tenant with every model; the "
            "one-line alternative to tenants_file, not to be set with it."
        ),
        repr=False,
        json_schema_extra={**_TENANTS, "metavar": "KEY"},
    )
    rate_limit_storage: str = Field(
        "memory://",
        description=(
            "Where tenants' rate limits and quotas are counted: 'memory://' (this process alone) or "
            "'redis://HOST:PORT[/DB]' ('rediss://' for TLS; needs the open-autoglm[redis] extra), which lets several "
            "replicas share one budget per tenant."
        ),
        repr=False,
        json_schema_extra={**_TENANTS, "metavar": "URL"},
    )
    usage_db: str | None = Field(
        None,
        description=(
            "SQLite file where each tenant's requests and tokens are counted, by day, across restarts; "
            "unset: $XDG_DATA_HOME/autoglm/usage.sqlite (~/.local/share/autoglm/usage.sqlite); ':memory:': "
            "counted for the process's life only. Used when tenants_file or api_key is set."
        ),
        json_schema_extra={**_TENANTS, "metavar": "FILE"},
    )
    usage_flush_interval_s: float = Field(
        1.0, gt=0,
        description="Seconds between writes of tenants' usage to usage_db, running requests' tokens included: "
                    "what a crash (kill -9) can lose.",
        json_schema_extra=_TENANTS,
    )
    registry: Literal["directory", "mlflow"] = Field(
        "directory",
        description="Where named model versions and their aliases are kept (see `autoglm models`): 'directory' "
                    "(one JSON file per model in registry_dir; no service needed) or 'mlflow' (the MLflow model "
                    "registry at mlflow_tracking_uri; needs the open-autoglm[mlflow] extra).",
        json_schema_extra=_VERSIONS,
    )
    registry_dir: str | None = Field(
        None,
        description="Folder of the directory registry; unset: $XDG_DATA_HOME/autoglm/registry "
                    "(~/.local/share/autoglm/registry). Checkpoints stay where they were registered from.",
        json_schema_extra={**_VERSIONS, "metavar": "FOLDER"},
    )
    metrics_require_key: bool = Field(
        False,
        description="Serve /metrics only to an admin key (it shows every tenant's usage); needs tenants_file "
                    "or api_key. False: /metrics is open, as /health is.",
        json_schema_extra=_TENANTS,
    )
    mlflow_tracking_uri: str | None = Field(
        None,
        description=(
            "The MLflow store of registry 'mlflow' (unset: the MLFLOW_TRACKING_URI environment variable): a tracking "
            "server's URL (http://HOST:5000) or sqlite:///PATH; needs the open-autoglm[mlflow] extra. Checkpoints are "
            "downloaded once per version under $XDG_CACHE_HOME/autoglm/mlflow (~/.cache/autoglm/mlflow) and checked "
            "against their registered SHA-256."
        ),
        repr=False,
        json_schema_extra={**_VERSIONS, "metavar": "URI"},
    )
    log_prompts: bool = Field(
        False,
        description="Write each request's prompt (or chat messages) in its request log line; off, no log line "
                    "holds a prompt's text.",
        json_schema_extra=_SERVER,
    )
    max_sequences_per_request: int = Field(
        256,
        ge=1,
        description=(
            "Most sequences one API request may create (its prompts times max(n, best_of)); more is refused with 400 "
            "naming the cap, so one request cannot fill the queue and the KV cache by itself. With n and best_of at "
            "most 16, the default admits 16 prompts at 16 samples or 256 prompts at one."
        ),
        json_schema_extra=_SERVER,
    )
    reasoning_parser: str | None = Field(
        None,
        description=(
            "How the model marks its thinking, to return it apart from the answer as reasoning_content (vLLM's "
            "--reasoning-parser): glm45 (GLM-4.5 to 4.7, GLM-4.1V, AutoGLM), qwen3 or deepseek_r1. Unset: the "
            "thinking stays in the content."
        ),
        json_schema_extra={**_SERVER, "metavar": "NAME"},
    )
    tool_call_parser: str | None = Field(
        None,
        description=(
            "The format tool_choice 'auto' reads the model's calls in (vLLM's --tool-call-parser): glm45, glm47, "
            "hermes, qwen3, llama3_json or glm4. Unset: the one the chat template teaches."
        ),
        json_schema_extra={**_SERVER, "metavar": "NAME"},
    )
    enable_auto_tool_choice: bool = Field(
        True,
        description=(
            "Let the model decide whether to call a tool (tool_choice 'auto', the default with tools; vLLM's "
            "--enable-auto-tool-choice, on here by default); off, such a request is refused with 400."
        ),
        json_schema_extra=_SERVER,
    )
    trust_request_chat_template: bool = Field(
        False,
        description=(
            "Accept a chat request's own chat_template (a Jinja template the server renders); off, a request that "
            "sends one is refused with 400."
        ),
        json_schema_extra=_SERVER,
    )
    chat_template_content_format: Literal["auto", "string", "openai"] = Field(
        "auto",
        description=(
            "How a message's content reaches the chat template: 'string' (text parts joined), 'openai' (the list "
            "of parts, [{'type': 'text', 'text': ...}]), or 'auto' (the list where the template loops over it)."
        ),
        json_schema_extra=_SERVER,
    )
    limit_mm_per_prompt: int = Field(
        10,
        ge=0,
        description=(
            "Images one chat request may carry, across all its messages (vLLM's {\"image\": N} is read too); more "
            "is a 400 naming the first part past the limit."
        ),
        json_schema_extra=_MEDIA,
    )
    mm_processor_kwargs: dict[str, int] = Field(
        {},
        description=(
            "The image processor's resizing bounds, as a mapping or its JSON text: {\"min_pixels\": N, "
            "\"max_pixels\": N}, the area an image is scaled into before it is cut into patches (a request's own "
            "mm_processor_kwargs replace them, max_pixels only downwards); empty: the checkpoint's "
            "preprocessor_config.json."
        ),
        json_schema_extra={**_MEDIA, "metavar": "JSON"},
    )
    allowed_media_domains: tuple[str, ...] = Field(
        (),
        description=(
            "Hosts http(s) image URLs may be fetched from ('*.example.com' for its subdomains; a list, or "
            "comma-separated in flags and variables), redirects included; a host named exactly may resolve to a "
            "private or loopback address, one matched by a wildcard may not. Empty: no image is fetched."
        ),
        json_schema_extra={**_MEDIA, "metavar": "HOSTS"},
    )
    allowed_local_media_path: str | None = Field(
        None,
        description="Folder whose files file:// image URLs may read (symbolic links out of it are refused); unset: "
                    "none.",
        json_schema_extra={**_MEDIA, "metavar": "FOLDER"},
    )
    media_fetch_timeout_s: float = Field(
        10.0, gt=0, description="Seconds fetching one image URL may take, redirects included.",
        json_schema_extra=_MEDIA,
    )
    max_image_bytes: int = Field(
        20 * 1024**2,
        ge=1,
        description="Largest encoded image (PNG, JPEG or WebP) a request may carry or a URL may return, in bytes or "
                    "a size such as '20MiB'; a larger one is answered 413.",
        json_schema_extra=_MEDIA,
    )
    max_image_pixels: int = Field(
        50_000_000,
        ge=1,
        description="Most pixels (width times height) an image may have, read from its header before it is decoded, "
                    "so that a small file cannot unpack into gigabytes.",
        json_schema_extra=_MEDIA,
    )
    response_cache: str | None = Field(
        None,
        description=(
            "Where answers of deterministic requests (temperature 0, or a fixed seed) are kept to be served again: "
            "'memory' (this process, LRU by response_cache_max_bytes) or 'redis://HOST:PORT[/DB]' ('rediss://' for "
            "TLS; needs the open-autoglm[redis] extra; shared by every replica that names it). Unset or 'off': no "
            "cache."
        ),
        repr=False,
        json_schema_extra={**_RESPONSE_CACHE, "metavar": "memory|URL|off"},
    )
    response_cache_ttl_s: float = Field(
        3600.0, gt=0, description="Seconds a cached answer is served before it expires.",
        json_schema_extra=_RESPONSE_CACHE,
    )
    response_cache_max_entry_bytes: int = Field(
        1024**2, ge=1,
        description="Largest answer kept in the response cache, in bytes or a size such as '1MiB'; larger "
                    "ones are served and not kept.",
        json_schema_extra=_RESPONSE_CACHE,
    )
    response_cache_max_bytes: int = Field(
        128 * 1024**2, ge=1,
        description="Bytes the 'memory' response cache holds; past them the least recently used answers go.",
        json_schema_extra=_RESPONSE_CACHE,
    )

    data_dir: str | None = Field(
        None,
        description=(
            "Folder of what the server keeps for its tenants between requests and restarts: stored responses, "
            "uploaded files, batches and their output. Unset: 'server' under the user data folder "
            "($XDG_DATA_HOME/autoglm, else ~/.local/share/autoglm)."
        ),
        json_schema_extra={**_STORAGE, "metavar": "FOLDER"},
    )
    storage_retention_days: float = Field(
        30.0, gt=0,
        description="Days a stored response, an uploaded file or a batch (with its output and error files) is kept; "
                    "then it is deleted.",
        json_schema_extra=_STORAGE,
    )
    tenant_storage_bytes: int = Field(
        10 * 1024**3, ge=1,
        description="Bytes of files (uploaded, and batches' output) and stored responses one tenant may keep, in "
                    "bytes or a size such as '10GiB'; an upload past it is answered 413.",
        json_schema_extra=_STORAGE,
    )
    max_file_bytes: int = Field(
        200 * 1000**2, ge=1,
        description="Largest file one upload may carry, in bytes or a size such as '200MB' (OpenAI's limit for "
                    "batch input files); a larger one is answered 413.",
        json_schema_extra=_STORAGE,
    )
    max_file_lines: int = Field(
        50_000, ge=1,
        description="Most lines (requests) one batch input file may hold, as OpenAI allows.",
        json_schema_extra=_STORAGE,
    )
    responses_store: str = Field(
        "sqlite",
        description=(
            "Where the Responses API keeps stored responses ('store': true): 'sqlite' (one file under data_dir, "
            "this server's alone) or 'redis://HOST:PORT[/DB]' ('rediss://' for TLS; needs the open-autoglm[redis] "
            "extra), which every replica naming it shares. On Ray with more than one replica, only Redis can keep "
            "them: with 'sqlite' there, 'store': true and previous_response_id are refused."
        ),
        repr=False,
        json_schema_extra={**_STORAGE, "metavar": "PLACE"},
    )
    batch_max_lines_in_flight: int = Field(
        4, ge=1,
        description="Batch lines this server runs at once, across every batch and tenant; each is a request of its "
                    "tenant at the lowest priority (max_abs_priority), within that tenant's limits and fair share.",
        json_schema_extra=_STORAGE,
    )

    serve_models: tuple[str, ...] = Field(
        (),
        description=(
            "References in the model registry to serve ('NAME' for its stable, 'NAME@ALIAS', 'NAME@VERSION'), as a "
            "list or one comma-separated string; requests then route by their model field and the /admin/models routes "
            "manage the versions. Empty: serve `model` alone, as served_model_name."
        ),
        json_schema_extra={**_VERSIONS, "metavar": "REFS"},
    )
    max_loaded_versions: int = Field(
        3, ge=1,
        description=(
            "With serve_models: most model versions loaded at once (a stable, its canary and the previous "
            "stable kept warm for rollback need 3); each gets an equal share of kv_cache_memory."
        ),
        json_schema_extra=_VERSIONS,
    )
    auto_rollback: bool = Field(
        False,
        description=(
            "Set a canary's split back to 0% when it breaks auto_rollback_max_error_rate or "
            "auto_rollback_max_p99_ttft_s over auto_rollback_window_s, with a log line saying why."
        ),
        json_schema_extra=_VERSIONS,
    )
    auto_rollback_window_s: float = Field(
        60.0, gt=0, description="Seconds of a canary's latest requests that automatic rollback judges.",
        json_schema_extra=_VERSIONS,
    )
    auto_rollback_min_requests: int = Field(
        20, ge=1, description="Canary requests the window must hold before automatic rollback judges it.",
        json_schema_extra=_VERSIONS,
    )
    auto_rollback_max_error_rate: float = Field(
        0.05, ge=0, le=1, description="Share of a canary's requests in the window that may fail (0-1).",
        json_schema_extra=_VERSIONS,
    )
    auto_rollback_max_p99_ttft_s: float | None = Field(
        None, gt=0, description="Highest p99 time to first token of a canary in the window, in seconds; "
                                "unset: latency never rolls back.",
        json_schema_extra=_VERSIONS,
    )

    lora_modules: dict[str, str] = Field(
        {},
        description=(
            "LoRA adapters served from the start (with enable_lora), each under its own name as a request's model: "
            "NAME=PATH entries or vLLM's {\"name\": NAME, \"path\": PATH} (as vLLM's --lora-modules takes them: "
            "several after the flag, a list, or one comma-separated string), or a mapping of name to folder (or its "
            "JSON text). Trusted like `model`: allowed_lora_path does not apply to them."
        ),
        json_schema_extra={**_VERSIONS, "metavar": "NAME=PATH", "nargs": "+"},
    )
    allowed_lora_path: str | None = Field(
        None,
        description=(
            "Folder that POST /v1/load_lora_adapter may load adapters from (its paths are resolved, symbolic links "
            "included, and must lie under it); unset: adapters load at runtime only with this set."
        ),
        json_schema_extra={**_VERSIONS, "metavar": "FOLDER"},
    )

    ray_min_replicas: int = Field(
        1,
        ge=1,
        description=(
            "With `autoglm serve --ray`: fewest engine replicas Ray Serve keeps running; equal to ray_max_replicas, a "
            "fixed count."
        ),
        json_schema_extra=_RAY,
    )
    # Declared after ray_min_replicas: its validator reads that already-validated value.
    ray_max_replicas: int = Field(
        1, ge=1,
        description="Most engine replicas Ray Serve scales out to; above ray_min_replicas, it adds and removes "
                    "replicas with the ongoing requests.",
        json_schema_extra=_RAY,
    )
    ray_target_ongoing_requests: float | None = Field(
        None, gt=0,
        description="Ongoing requests per replica the autoscaler aims at; a replica holding this many is passed "
                    "over by cache-aware routing. Unset: max_num_seqs (a full batch).",
        json_schema_extra=_RAY,
    )
    ray_prefix_routing: bool = Field(
        True,
        description="Send requests whose prompts begin alike to the same replica, where their prefix is cached "
                    "(consistent hashing, least-loaded while that replica is busy); false: Ray's default routing.",
        json_schema_extra=_RAY,
    )
    ray_prefix_routing_chars: int = Field(
        256, ge=1,
        description="Leading characters of the prompt (or of the chat's messages) that pick a request's replica.",
        json_schema_extra=_RAY,
    )
    ray_metrics_port: int | None = Field(
        9400, ge=1, le=65535,
        description="Each replica serves its /metrics on this port plus its rank on its node, at the host "
                    "setting's address; unset: no metrics ports.",
        json_schema_extra={**_RAY, "metavar": "PORT"},
    )
    ray_num_gpus: float = Field(
        0.0,
        ge=0,
        description="GPUs Ray reserves for each engine replica (its CPUs: num_threads, else 1).",
        json_schema_extra={**_RAY, "metavar": "GPUS"},
    )

    def __init__(self, /, **data: Any) -> None:
        """Build from keyword arguments, reporting unknown names and bad values as ConfigError."""
        settings = _sourced_settings()
        settings.add_layer((key, value, ARGUMENT_SOURCE) for key, value in data.items())
        self._validate_into_self(settings)

    def _validate_into_self(self, settings: SourcedSettings) -> None:
        """Validate `settings` into this instance, blaming each bad value on the layer it came from."""
        try:
            super().__init__(**settings.values)
        except ValidationError as error:
            raise ConfigError(settings.explain(error)) from None

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """Names of all settings, in declaration order (the CLI builds its flags from them)."""
        return tuple(cls.model_fields)

    @classmethod
    def group_of(cls, name: str) -> SettingGroup:
        """The group a setting belongs to, from its field metadata."""
        return SettingGroup(cls.model_fields[name].json_schema_extra["group"])

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> AutoGLMConfig:
        """Read settings from a file, then let environment variables and overrides replace them."""
        return cls.from_sources(path, overrides, env)

    @classmethod
    def from_sources(
        cls,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> AutoGLMConfig:
        """Merge `defaults`, an optional file, AUTOGLM_* variables of `env` (default os.environ) and overrides.

        Later layers win; None values in `overrides` mean "not given" (an unset CLI flag).
        `defaults` replace the built-in defaults for one command, such as a benchmark's dtype.
        """
        settings = _sourced_settings()
        settings.add_layer((key, value, DEFAULTS_SOURCE) for key, value in (defaults or {}).items())
        if path is not None:
            source = str(path)
            settings.add_layer((key, value, source) for key, value in read_settings_file(Path(path)).items())
        settings.add_layer(env_settings(os.environ if env is None else env))
        settings.add_layer(
            (key, value, ARGUMENT_SOURCE) for key, value in (overrides or {}).items() if value is not None
        )
        # Not cls(**values): __init__ would blame every bad value on the arguments.
        config = cls.__new__(cls)
        config._validate_into_self(settings)
        return config

    def engine_config(self) -> EngineConfig:
        """The settings an engine reads, grouped: what the engine, the runner and tensor-parallel workers get."""
        return EngineConfig(
            model=_part(ModelConfig, self),
            device=_part(DeviceConfig, self),
            cache=_part(CacheConfig, self),
            scheduler=_part(SchedulerConfig, self),
            parallel=_part(ParallelConfig, self),
            speculative=self.speculative_config,
            lora=_part(LoRAConfig, self),
            pooling=_part(PoolingConfig, self),
        )

    def server_config(self) -> ServerConfig:
        """The settings a server reads, grouped, with the engine settings of the model it starts."""
        return ServerConfig(
            http=_part(HttpConfig, self),
            tenants=_part(TenantsConfig, self),
            response_cache=_part(ResponseCacheConfig, self),
            versions=_part(VersionsConfig, self),
            adapters=_part(AdaptersConfig, self),
            ray=_part(RayConfig, self),
            chat=_part(ChatConfig, self),
            media=_part(MediaConfig, self),
            storage=_part(StorageConfig, self),
            engine=self.engine_config(),
        )

    @field_validator("dtype", "kv_cache_dtype", mode="before")
    @classmethod
    def _canonical_dtype(cls, value: object, info: ValidationInfo) -> object:
        """Lower case, and an alias (``bf16``, ``fp8``) replaced by the name it stands for."""
        if isinstance(value, str):
            name = value.strip().lower()
            aliases = _DTYPE_ALIASES if info.field_name == "dtype" else _KV_CACHE_DTYPE_ALIASES
            return aliases.get(name, name)
        return value

    @field_validator("chat_template")
    @classmethod
    def _readable_template(cls, path: str | None) -> str | None:
        if path is not None:
            read_chat_template(path)
        return path

    @field_validator("device")
    @classmethod
    def _device_form(cls, device: str) -> str:
        if _DEVICE_PATTERN.fullmatch(device) is None:
            raise ValueError("expected 'auto', 'cpu', 'cuda', 'cuda:N', 'xpu', 'xpu:N' or 'mps'")
        return device

    @field_validator("kv_cache_memory", mode="before")
    @classmethod
    def _kv_cache_budget(cls, value: object) -> str | int | float:
        if isinstance(value, str):
            text = value.strip()
            if text.lower() == "auto":
                return "auto"
            # A unitless decimal ("0.9", as environment variables spell floats) is a fraction.
            value = float(text) if _FRACTION_PATTERN.fullmatch(text) else parse_byte_size(text)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        if isinstance(value, float) and 0 < value <= 1:
            return value
        raise ValueError(_KV_CACHE_MEMORY_EXPECTED)

    @field_validator("max_request_body_bytes", "response_cache_max_entry_bytes", "response_cache_max_bytes",
                     "max_image_bytes", "tenant_storage_bytes", "max_file_bytes", "kv_offload_bytes", "kv_disk_bytes",
                     mode="before")
    @classmethod
    def _byte_size(cls, value: object) -> object:
        return parse_byte_size(value) if isinstance(value, str) else value

    @field_validator("allowed_hosts", "cors_allowed_origins", "serve_models", "allowed_media_domains", mode="before")
    @classmethod
    def _name_list(cls, value: object, info: ValidationInfo) -> tuple[str, ...] | None:
        """A list of names, or one string of comma-separated names (as flags and environment variables give it)."""
        if value is None and info.field_name == "allowed_hosts":
            return None
        if isinstance(value, str):
            value = [name.strip() for name in value.split(",") if name.strip()]
        if not isinstance(value, (list, tuple)) or not all(isinstance(name, str) for name in value):
            raise ValueError("expected a list of names, or one string of comma-separated names")
        if not value and info.field_name == "allowed_hosts":
            raise ValueError("an empty list would refuse every request; give names, '*' for any, or leave it unset")
        return tuple(value)

    @field_validator("lora_modules", mode="before")
    @classmethod
    def _adapter_modules(cls, value: object) -> dict[str, str]:
        return parse_lora_modules(value)
    @field_validator("classifier_from_token", "matryoshka_dimensions", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        """A list, or one string of comma-separated items (as flags and environment variables give it)."""
        if isinstance(value, str):
            value = [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("classifier_from_token")
    @classmethod
    def _token_pair(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and len(value) != 2:
            raise ValueError(f"expected two tokens, the 'no' one then the 'yes' one (such as 'no,yes'), got {len(value)}")
        return value

    @field_validator("matryoshka_dimensions")
    @classmethod
    def _positive_sizes(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is not None and (not value or min(value) < 1):
            raise ValueError("expected one or more embedding sizes of at least 1")
        return value

    @field_validator("limit_mm_per_prompt", mode="before")
    @classmethod
    def _images_per_prompt(cls, value: object) -> object:
        """A number, or vLLM's mapping of modality to number (or its JSON text), of which images are read."""
        if isinstance(value, str) and value.strip().startswith("{"):
            value = _json_object(value)
        if isinstance(value, Mapping):
            others = sorted(set(value) - {"image"})
            if others:
                raise ValueError(f"this server takes images only, so it has no limit for {others[0]!r}; give "
                                 f"{{\"image\": N}} or a number")
            return value.get("image", 10)
        return value

    @field_validator("mm_processor_kwargs", mode="before")
    @classmethod
    def _image_processor_kwargs(cls, value: object) -> dict[str, int]:
        if value is None:
            return {}
        if isinstance(value, str):
            value = _json_object(value) if value.strip() else {}
        return check_image_processor_kwargs(value)

    @field_validator("allowed_local_media_path", "allowed_lora_path")
    @classmethod
    def _existing_folder(cls, path: str | None, info: ValidationInfo) -> str | None:
        if path is not None and not Path(path).is_dir():
            reader = ("POST /v1/load_lora_adapter may load adapters from" if info.field_name == "allowed_lora_path"
                      else "whose images file:// URLs may read")
            raise ValueError(f"{path!r} is not a folder; give an existing folder {reader}")
        return path

    @field_validator("rate_limit_storage")
    @classmethod
    def _rate_limit_storage_url(cls, url: str) -> str:
        if url != "memory://" and _REDIS_URL_PATTERN.fullmatch(url) is None:
            raise ValueError("expected 'memory://' or 'redis://HOST:PORT[/DB]' (rediss:// for TLS)")
        return url

    @field_validator("responses_store")
    @classmethod
    def _responses_store_place(cls, place: str) -> str:
        if place != "sqlite" and _REDIS_URL_PATTERN.fullmatch(place) is None:
            raise ValueError("expected 'sqlite' or 'redis://HOST:PORT[/DB]' (rediss:// for TLS)")
        return place

    @field_validator("response_cache")
    @classmethod
    def _response_cache_place(cls, place: str | None) -> str | None:
        if place is None or place == "off":
            return None
        if place != "memory" and _REDIS_URL_PATTERN.fullmatch(place) is None:
            raise ValueError("expected 'memory', 'redis://HOST:PORT[/DB]' (rediss:// for TLS), or 'off'")
        return place

    @field_validator("ray_max_replicas")
    @classmethod
    def _at_least_min_replicas(cls, most: int, info: ValidationInfo) -> int:
        fewest = info.data.get("ray_min_replicas", 1)
        if most < fewest:
            raise ValueError(f"must be at least ray_min_replicas ({fewest})")
        return most

    @field_validator("max_cpu_loras")
    @classmethod
    def _loaded_loras_cover_the_batch(cls, value: int | None, info: ValidationInfo) -> int | None:
        max_loras = info.data.get("max_loras")
        if value is not None and max_loras is not None and value < max_loras:
            raise ValueError(f"must be at least max_loras ({max_loras}): every adapter of a step is loaded, "
                             f"got {value}")
        return value

    @field_validator("speculative_config", mode="before")
    @classmethod
    def _speculative_config(cls, value: object, info: ValidationInfo) -> SpeculativeConfig | None:
        config = parse_speculative_config(value)
        if config is not None and config.method != "ngram" and info.data.get("tensor_parallel_size", 1) > 1:
            raise ValueError(f"method '{config.method}' runs its proposer in the engine's own process and needs "
                             "tensor_parallel_size 1; use method 'ngram' under tensor parallelism")
        return config

    @field_validator("enable_expert_parallel")
    @classmethod
    def _expert_parallel_needs_ranks(cls, enabled: bool, info: ValidationInfo) -> bool:
        size = info.data.get("tensor_parallel_size", 1)
        if enabled and size < 2:
            raise ValueError(f"splits the experts between tensor-parallel ranks and needs tensor_parallel_size of "
                             f"2 or more, got {size}")
        return enabled

    @field_validator("enable_prefix_caching")
    @classmethod
    def _prefix_caching_needs_paging(cls, enabled: bool, info: ValidationInfo) -> bool:
        # Without blocks there is nothing to share between requests.
        return enabled and info.data.get("use_paged_attention", True)


def _json_object(text: str) -> object:
    """A flag's or variable's JSON text, read; ValueError saying where it is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"expected a JSON object; {error}") from None


def _sourced_settings() -> SourcedSettings:
    """An empty stack of layers that knows AutoGLMConfig's settings and their other names."""
    return SourcedSettings(AutoGLMConfig.model_fields, SETTING_ALIASES)


def _part(part: type[_Part], settings: AutoGLMConfig) -> _Part:
    """One group of `settings` as `part`, a dataclass whose fields are named as the settings are."""
    return part(**{name.name: getattr(settings, name.name) for name in fields(part)})
