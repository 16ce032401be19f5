"""What the engine, the runner and tensor-parallel workers are told: plain frozen data, one part per concern.

Built from the user's settings by `AutoGLMConfig.engine_config`; holds no server setting and no secret,
since workers receive it pickled.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from autoglm.config.pooling import PoolingConfig
from autoglm.config.sources import ConfigError
from autoglm.config.speculative import SpeculativeConfig


@dataclass(frozen=True)
class ModelConfig:
    """Which weights and tokenizer to load, and how to load them."""

    model: str | None  # None: the embedded default model
    tokenizer: str | None  # None: the model folder
    chat_template: str | None  # a Jinja file used instead of the tokenizer's template; None: the tokenizer's
    dtype: str
    max_context_len: int
    seed: int
    quantization: str
    quantization_group_size: int | None
    quantize_lm_head: bool


@dataclass(frozen=True)
class DeviceConfig:
    """Where the model runs and which kernels its steps take."""

    device: str
    cpu_upcast_half: bool
    cpu_linear_kernel: str
    cpu_kernel_max_rows: int | str
    cpu_decode_step_max_rows: int
    enforce_eager: bool
    num_threads: int | None


@dataclass(frozen=True)
class CacheConfig:
    """The KV cache's blocks, budget and storage."""

    block_size: int
    kv_cache_memory: str | int | float
    use_paged_attention: bool
    enable_prefix_caching: bool
    kv_cache_dtype: str
    kv_offload_bytes: int = 0  # the host tier below the pool; 0: evicted blocks are lost
    kv_disk_path: str | None = None  # the disk tier below the host tier; None: none
    kv_disk_bytes: int = 10 * 1024**3

    def kv_cache_bytes(self, total_device_bytes: int | None) -> int | None:
        """The KV cache budget in bytes, or None to let the engine size it.

        `total_device_bytes` is the accelerator's memory, None on the CPU, where a fraction has
        nothing to be a fraction of.
        """
        if self.kv_cache_memory == "auto":
            return None
        if isinstance(self.kv_cache_memory, int):
            return self.kv_cache_memory
        if total_device_bytes is None:
            raise ConfigError(
                f"kv_cache_memory: a fraction ({self.kv_cache_memory}) needs a device that reports its memory "
                "size, and this one does not; give a size such as '4GiB' instead"
            )
        return int(self.kv_cache_memory * total_device_bytes)


@dataclass(frozen=True)
class SchedulerConfig:
    """How many sequences and tokens a step takes, and in which order requests are served."""

    max_num_seqs: int
    max_num_seqs_per_tenant: int | None
    max_num_batched_tokens: int
    enable_chunked_prefill: bool
    async_scheduling: bool | str
    scheduling_policy: str
    max_abs_priority: int


@dataclass(frozen=True)
class ParallelConfig:
    """How the model is split across processes."""

    tensor_parallel_size: int
    distributed_backend: str
    enable_expert_parallel: bool = False  # a mixture-of-experts model's ranks hold shares of its experts whole
    pipeline_parallel_size: int = 1  # stages of the decoder's layers, each on tensor_parallel_size ranks


@dataclass(frozen=True)
class LoRAConfig:
    """Whether requests may name LoRA adapters, and how many the engine keeps in each form."""

    enable_lora: bool = False
    max_loras: int = 1  # adapters in the batch's format at once: a step runs rows of at most this many
    max_lora_rank: int = 16  # the rank every adapter's matrices are padded to; a higher one is refused
    max_cpu_loras: int | None = None  # adapters kept loaded in memory; None: max_loras

    @property
    def max_loaded(self) -> int:
        return self.max_loras if self.max_cpu_loras is None else self.max_cpu_loras


@dataclass(frozen=True)
class EngineConfig:
    """Every setting an engine reads, grouped; access paths read like ``config.cache.block_size``."""

    model: ModelConfig
    device: DeviceConfig
    cache: CacheConfig
    scheduler: SchedulerConfig
    parallel: ParallelConfig
    speculative: SpeculativeConfig | None  # None: speculative decoding is off
    lora: LoRAConfig = LoRAConfig()
    pooling: PoolingConfig = PoolingConfig()  # generate or pool, and how

    def for_model(self, checkpoint: str) -> EngineConfig:
        """These settings for another checkpoint, read with its own tokenizer (a server's other versions)."""
        return replace(self, model=replace(self.model, model=checkpoint, tokenizer=None))
