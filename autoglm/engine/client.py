"""What a front end may ask of a running engine, and how it gets one.

The HTTP server (its hot swap and its Ray replicas included) talks to engines only through
``EngineClient`` and builds them only through ``engine_builder`` and ``open_client``: it never
reaches into the scheduler, the runner or the model, so those can change without a route noticing.
``AsyncEngine`` is the client; a request is aborted by leaving its ``generate`` iteration.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch
from transformers import PreTrainedTokenizerBase

from autoglm.config import EngineConfig
from autoglm.engine.async_engine import AsyncEngine
from autoglm.engine.errors import EngineBrokenError
from autoglm.engine.heartbeat import EngineHeartbeat
from autoglm.engine.input_processor import InputProcessor
from autoglm.engine.llm_engine import LLMEngine
from autoglm.engine.native_memory import bound_onednn_primitive_cache
from autoglm.engine.request_stream import DeltaObserver, IndexedOutput
from autoglm.engine.pooling.model_kind import PoolingModel
from autoglm.engine.sequence import TenantTag
from autoglm.engine.stats import EngineStats
from autoglm.engine.tensor_parallel.worker_group import group_in_use
from autoglm.engine.tokenize import Prompt
from autoglm.lora_request import LoRARequest
from autoglm.outputs import PoolingRequestOutput
from autoglm.pooling_params import PoolingParams
from autoglm.sampling_params import SamplingParams
from autoglm.structured_outputs import StructuredOutputsParams

# Builds an engine, blocking while its model loads (callers run it on a worker thread).
EngineBuilder = Callable[[], LLMEngine]


@runtime_checkable
class EngineClient(Protocol):
    """One loaded model's engine, as the server sees it (checkable with isinstance: every member present)."""

    stats: EngineStats  # the latest snapshot, replaced after every step
    heartbeat: EngineHeartbeat  # whether the engine is stuck in a step

    @property
    def config(self) -> EngineConfig: ...  # the engine's own settings: its checkpoint, dtype, quantization

    @property
    def model_path(self) -> Path: ...

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase: ...

    @property
    def max_context_len(self) -> int: ...

    @property
    def inputs(self) -> InputProcessor: ...  # every check of a request, the engine's own

    @property
    def dtype(self) -> torch.dtype: ...  # what weights and KV are computed in

    @property
    def linear_methods(self) -> str: ...  # how the projections and the LM head compute

    @property
    def device_type(self) -> str: ...

    @property
    def is_running(self) -> bool: ...

    def start(self) -> None: ...

    async def shutdown(self) -> None: ...

    def generate(self, request_id: str, prompts: list[Prompt], params: SamplingParams, priority: int = 0,
                 arrival_time: float | None = None, observe: DeltaObserver | None = None,
                 tenant: TenantTag | None = None,
                 lora_request: LoRARequest | None = None) -> AsyncIterator[IndexedOutput]: ...

    # LoRA adapters (LoRAAdapterError without enable_lora): load (files read off the event loop, installed between
    # steps; the same name and folder again is a no-op; LoRACapacityError when max_cpu_loras are all busy), unload
    # (drains: new requests refused at once, running ones finish, then it returns), and those loaded.
    async def add_lora(self, lora_request: LoRARequest) -> None: ...

    async def remove_lora(self, lora_name: str) -> None: ...

    def list_loras(self) -> list[LoRARequest]: ...

    async def encode(self, request_id: str, prompts: list[Prompt], pooling_params: PoolingParams, priority: int = 0,
                     tenant: TenantTag | None = None) -> list[PoolingRequestOutput]: ...

    @property
    def pooling_model(self) -> PoolingModel | None: ...  # what a pooling engine's model makes; None: it generates

    def compile_grammar(self, constraint: StructuredOutputsParams) -> None: ...  # blocks: run it on a worker thread

    def notify_when_broken(self, listener: Callable[[EngineBrokenError], None]) -> None: ...


class TensorParallelGroupInUse(RuntimeError):
    """A server may not build a second tensor-parallel engine: it would close the one serving."""


def engine_builder(config: EngineConfig) -> EngineBuilder:
    """An engine of `config`'s model, built when called.

    A process holds one tensor- or pipeline-parallel group, and a new parallel engine closes the one before
    it (what a script replacing its ``LLM`` wants); a server loading another version beside the one it
    serves must not, so the build is refused instead.
    """
    def build() -> LLMEngine:
        parallel = config.parallel
        if parallel.tensor_parallel_size * parallel.pipeline_parallel_size > 1 and group_in_use():
            raise TensorParallelGroupInUse(
                "this server already runs a tensor- or pipeline-parallel engine, and a process holds one such "
                "group: unload that version first, or serve this one from a server of its own")
        return LLMEngine(config)

    return build


def open_client(build: EngineBuilder, max_waiting_requests: int, request_timeout_s: float) -> EngineClient:
    """The engine `build` makes, behind its client, not started yet; blocks while the model loads."""
    bound_onednn_primitive_cache()
    return AsyncEngine(build(), max_waiting_requests, request_timeout_s)
