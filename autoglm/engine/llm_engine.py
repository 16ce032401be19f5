"""The engine: requests in, one scheduled forward pass per step, outputs back.

Both the offline :class:`autoglm.llm.LLM` and the HTTP server drive this class.
"""
from __future__ import annotations

import contextlib
import logging
import random
import time
import weakref
from collections.abc import Callable

import torch

from autoglm.config import EngineConfig
from autoglm.engine.async_scheduling import (
    LaunchedStep,
    async_scheduling_enabled,
    needs_synchronous_steps,
    overlaps_again,
)
from autoglm.engine.sched.block_manager import BlockManager, salt_bytes
from autoglm.engine.detokenizer import IncrementalDetokenizer
from autoglm.engine.plan_builder import build_step_plan
from autoglm.engine.errors import EngineBrokenError, RequestsFailedError
from autoglm.engine.input_processor import InputProcessor
from autoglm.engine.kv_offload.build import build_kv_offload
from autoglm.engine.kernel_switch import KernelSwitch
from autoglm.engine.lora.loaded import LoadedAdapters
from autoglm.engine.lora.slot_table import SlotTable
from autoglm.engine.tokenize import Prompt
from autoglm.engine.output_processor import take_output
from autoglm.engine.pooling.model_kind import engine_pools, pooling_model
from autoglm.engine.pooling.pooled_prompt import PooledPrompt
from autoglm.engine.pooling.requests import check_pooling_params, pooled_output, refuse_generation
from autoglm.engine.pipeline_parallel.microbatches import Microbatches, seqs_per_microbatch
from autoglm.engine.request_state import CompletionState, RequestState
from autoglm.engine.sched.fair_share import FairSharePolicy
from autoglm.engine.sched.batch import ScheduledBatch
from autoglm.engine.sched.scheduler import Scheduler
from autoglm.engine.sched.policies import SCHEDULING_POLICIES
from autoglm.engine.sequence import Sequence, TenantTag
from autoglm.engine.setup import EngineParts, build_engine_parts
from autoglm.engine.structured_output import GrammarCache, SequenceConstraint, ThinkingState, new_constraint
from autoglm.engine.speculative.build import build_proposer
from autoglm.engine.speculative.metrics import SpecDecodeStats
from autoglm.engine.stats import EngineStats
from autoglm.engine.speculative.proposer import max_lookahead
from autoglm.engine.speculative.verify import num_accepted
from autoglm.engine.step_images import EncodedImages
from autoglm.engine.step_isolation import StepIsolation
from autoglm.engine.step_result import SampledToken, StepResult, step_result
from autoglm.errors import InvalidRequestError, LoRAAdapterError, quote_value
from autoglm.kernels.cpu_extension import cpu_kernels_in_use, wait_for_cpu_kernels
from autoglm.lora_request import LoRARequest
from autoglm.models.image_input_spec import ImageInputSpec
from autoglm.models.linear_method import CpuKernelLinearMethod, measure_row_limits
from autoglm.models.lora import LoRAAdapter, read_adapter
from autoglm.outputs import PoolingRequestOutput, RequestMetrics, RequestOutput
from autoglm.pooling_params import PoolingParams
from autoglm.profiling import NO_PROFILER, OUTPUTS, SCHEDULE, NullProfiler, StepProfiler
from autoglm.sampling_params import SamplingParams
from autoglm.structured_outputs import StructuredOutputsParams

logger = logging.getLogger(__name__)

class LLMEngine:
    """Continuous batching over a paged KV cache."""

    def __init__(self, config: EngineConfig, parts: EngineParts | None = None) -> None:
        self.config = config
        parts = parts or build_engine_parts(config)
        self.model_path = parts.model_path
        self.model_config = parts.model_config
        self.tokenizer = parts.tokenizer
        self.device = parts.device
        self.dtype = parts.dtype  # what weights and KV are computed in (see platforms.compute_dtype)
        self.max_context_len = parts.max_context_len
        self.eos_token_ids = parts.eos_token_ids
        self.runner = parts.runner
        self.linear_methods = parts.linear_methods
        self._workers = parts.workers
        # Workers stop with the engine however it goes: closed, collected, or at the interpreter's exit.
        self._stop_workers = weakref.finalize(self, parts.workers.close) if parts.workers is not None else None
        self.kv_bytes_per_token = parts.kv_bytes_per_token
        self.kv_offload = build_kv_offload(config, parts)  # the KV tiers below the pool, if any
        self.block_manager = BlockManager(
            num_blocks=parts.num_blocks,
            block_size=config.cache.block_size,
            enable_prefix_caching=config.cache.enable_prefix_caching,
            reserve_tokens_per_seq=None if config.cache.use_paged_attention else self.max_context_len,
            lower_tiers=self.kv_offload,
        )
        lora = config.lora
        # The adapters loaded in memory, and which of them the model's slots hold; None without enable_lora.
        self.adapters = LoadedAdapters(lora.max_loaded) if lora.enable_lora else None
        self.adapter_slots = SlotTable(lora.max_loras) if lora.enable_lora else None
        self._request_adapters: dict[str, str] = {}  # request id -> the name of the adapter it runs with
        self.inputs = InputProcessor(self.tokenizer, self.model_config.vocab_size, self.max_context_len,
                                     self.block_manager, config.scheduler.max_abs_priority,
                                     ImageInputSpec.of(self.model_config), self.adapters)
        self.encoded_images = EncodedImages()  # the images the runner holds encoded
        # What the model makes of a prompt where the engine pools (see autoglm.engine.pooling); None: it generates.
        self.pooling_model = (pooling_model(config.pooling, self.model_path, self.model_config, self.tokenizer)
                              if engine_pools(config.pooling, self.model_path, self.model_config) else None)
        if self.pooling_model is not None and config.speculative is not None:
            raise ValueError("speculative_config proposes tokens, and a pooling engine generates none: unset it, or "
                             "set runner to 'generate'")
        self.proposer = build_proposer(config, parts)
        self.spec_decode_stats = SpecDecodeStats()
        self.fair_share = FairSharePolicy(SCHEDULING_POLICIES[config.scheduler.scheduling_policy]())
        num_stages = config.parallel.pipeline_parallel_size
        self.scheduler = Scheduler(
            self.block_manager, config.scheduler.max_num_seqs, config.scheduler.max_num_batched_tokens,
            config.scheduler.enable_chunked_prefill, self.fair_share, config.scheduler.max_num_seqs_per_tenant,
            lookahead=self._lookahead if self.proposer is not None else None,
            max_loras=lora.max_loras if lora.enable_lora else None,
            max_seqs_per_step=seqs_per_microbatch(config.scheduler.max_num_seqs, num_stages),
        )
        self._microbatches = Microbatches(num_stages)  # launched, not read yet (pipeline parallelism)
        self.scheduler.in_flight = self._microbatches.seqs
        # Unseeded requests take their seed from this, not from torch's global RNG: engines in one
        # process stay independent, and one engine's outputs are fixed by its seed and request order.
        self.request_seeds = random.Random(config.model.seed)
        self.grammars = GrammarCache(self.tokenizer, self.model_config.vocab_size, self.eos_token_ids)
        self.requests: dict[str, RequestState] = {}
        self.profiler: NullProfiler | StepProfiler = NO_PROFILER
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.async_scheduling = async_scheduling_enabled(config.scheduler.async_scheduling, self.device)
        self._synchronous_requests: set[str] = set()  # ids of requests whose steps may not overlap
        self._in_flight: LaunchedStep | None = None  # launched, its tokens not read yet (async scheduling)
        self.isolation = StepIsolation()
        self.num_failed_steps = 0
        self._carried_outputs: list[RequestOutput] = []  # of requests that finished in a step that then failed
        # The mask jobs done when the last step found nothing to run (every sequence waits for its mask); None
        # once a request came or went since: only a newly computed mask can make one of those runnable.
        self._idle_at_masks_done: int | None = None
        # The latest step's time from its schedule to its tokens, which bounds a step's wait for fresh masks.
        self._last_step_s = 0.0
        self._scheduled_at = 0.0
        self.kernel_switch = KernelSwitch.for_device(self.device)
        self.scheduler.admits_request = self.kernel_switch.admits
        if self.kernel_switch.in_use:
            self._prepare_kernels()

    @property
    def decode_weight_dtype(self) -> torch.dtype:
        """What a decode step of few rows reads its weights as: bfloat16 where a CPU linear kernel reads
        bfloat16 weights (``cpu_linear_kernel``) and the engine uses it, int8/int4 under quantization, else the
        compute dtype."""
        with cpu_kernels_in_use(self.kernel_switch.in_use):
            return self.linear_methods.layers.decode_weight_dtype(self.dtype)

    @classmethod
    def from_config(cls, config: EngineConfig) -> "LLMEngine":
        return cls(config)

    def close(self) -> None:
        """Stop the tensor- or pipeline-parallel workers, if any, and the mask threads, and write every rank's host KV
        tier's blocks to the disk tier, if any; the engine cannot step after this. Steps still in a pipeline are run
        through first, so that every rank is free to read its stop."""
        self.grammars.workers.close()
        if self._stop_workers is not None:
            with contextlib.suppress(EngineBrokenError):
                self._microbatches.drain()
        if self.kv_offload is not None:
            self.kv_offload.area.persist()  # each worker writes its own as it stops
        if self._stop_workers is not None:
            self._stop_workers()
        if self.kv_offload is not None:
            self.kv_offload.close()

    def wait_for_cpu_kernels(self) -> None:
        """On the CPU, wait for the kernels' build (saying so on the console) and switch to them before any
        request begins: for a driver that would rather wait than run its requests on plain PyTorch."""
        if self.device.type == "cpu" and wait_for_cpu_kernels() is not None \
                and self.kernel_switch.at_step_boundary(self._begun_requests()):
            self._prepare_kernels()

    def _prepare_kernels(self) -> None:
        """What the kernels' first steps would otherwise do in a request's time: measure the row limits of
        projections that take a kernel."""
        if isinstance(self.linear_methods.layers, CpuKernelLinearMethod):
            with cpu_kernels_in_use(True):
                measure_row_limits(self.runner.model)

    def _begun_requests(self) -> set[str]:
        """The unfinished requests that have run a step."""
        return {request_id for request_id, state in self.requests.items()
                if state.metrics.first_scheduled_time is not None}

    def notify_when_broken(self, listener: Callable[[EngineBrokenError], None]) -> None:
        """Call ``listener`` (from another thread) the moment the engine breaks for good, even between steps:
        a tensor-parallel worker died. A single-process engine never does."""
        if self._workers is not None:
            self._workers.add_broken_listener(listener)

    def wait_for_work(self) -> None:
        """Sleep while :meth:`has_work_to_step` is False for want of a mask, until the next one is computed: a
        driver that steps in a loop and takes no requests meanwhile (``LLM.generate``) calls it between steps."""
        if self.requests and self._idle_at_masks_done is not None:
            self.grammars.workers.wait_past(self._idle_at_masks_done)

    def notify_when_mask_ready(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from a mask thread) each time a constrained sequence's next mask is computed:
        a driver sleeping while :meth:`has_work_to_step` is False has work again."""
        self.grammars.workers.add_done_listener(listener)

    # ---- requests -------------------------------------------------------------------
    def compile_grammar(self, constraint: StructuredOutputsParams) -> None:
        """Compile ``constraint`` into the engine's grammar cache; a schema, regex or grammar that does
        not compile raises InvalidRequestError naming it. Thread-safe and slow on a miss (the first
        call also loads xgrammar), so the server calls it on a worker thread before it submits a
        request, whose ``add_request`` then finds it cached."""
        self.grammars.compile(constraint)

    def add_request(self, request_id: str, prompt: Prompt, params: SamplingParams | PoolingParams | None = None,
                    arrival_time: float | None = None, priority: int = 0, tenant: TenantTag | None = None,
                    lora_request: LoRARequest | None = None) -> None:
        """Queue a request; bad input raises InvalidRequestError naming what is wrong and what is allowed
        (see :mod:`autoglm.engine.input_processor`). PoolingParams make it a pooling request, which a pooling
        engine alone serves (and it serves no other).

        ``tenant`` is whom it is served for: its share of the engine among tenants, and the prefix
        cache it sees (None: the one implicit tenant, with the unsalted cache). ``lora_request`` names a
        loaded LoRA adapter to run it with (see :meth:`add_lora`); None: the base model.
        """
        if isinstance(params, PoolingParams):
            if lora_request is not None:
                raise InvalidRequestError(f"LoRA adapter {quote_value(lora_request.lora_name)} cannot pool: "
                                          "embeddings, scores and classifications run on the base model only")
            self._add_pooling_request(request_id, prompt, params, arrival_time, priority, tenant)
            return
        if self.pooling_model is not None:
            raise refuse_generation(self.pooling_model)
        params = params or SamplingParams()
        checked = self.inputs.process(request_id, prompt, params, priority, self.requests, lora_request)
        token_ids, max_tokens = checked.token_ids, checked.max_tokens
        arrival = time.time() if arrival_time is None else arrival_time
        cache_salt = b"" if tenant is None else salt_bytes(tenant.salt)
        seqs: list[Sequence] = []
        for index in range(params.n):
            seqs.append(Sequence(
                request_id=request_id, index=index, token_ids=list(token_ids), num_prompt_tokens=len(token_ids),
                params=params, max_tokens=max_tokens, arrival_time=arrival, priority=priority, tenant=tenant,
                cache_salt=cache_salt, seed=self._sequence_seed(params, index), parent=seqs[0] if seqs else None,
                constraint=self._new_constraint(params), vision=checked.vision, adapter=checked.adapter,
            ))
        state = RequestState(
            request_id=request_id, prompt=checked.prompt, prompt_token_ids=list(token_ids), params=params,
            metrics=RequestMetrics(arrival_time=arrival),
            completions=[
                CompletionState(seq, IncrementalDetokenizer(self.tokenizer, token_ids, params),
                                logprobs=[] if params.logprobs is not None else None)
                for seq in seqs
            ],
            pending_children=seqs[1:],
            prompt_logprobs=[None] if params.prompt_logprobs is not None else None,
        )
        self.requests[request_id] = state
        if checked.adapter is not None:
            self.adapters.acquire(lora_request)
            self._request_adapters[request_id] = lora_request.lora_name
        if needs_synchronous_steps(params):
            self._synchronous_requests.add(request_id)
        self.scheduler.add(seqs[0])
        self.prompt_tokens_total += len(token_ids)
        self._idle_at_masks_done = None

    def _add_pooling_request(self, request_id: str, prompt: Prompt, params: PoolingParams, arrival_time: float | None,
                             priority: int, tenant: TenantTag | None) -> None:
        """Queue a prompt-only sequence that samples nothing: its chunks are pooled as they are read, and it
        finishes, freeing its blocks, with its prompt's last chunk. Its steps run one at a time (see
        async_scheduling): it must finish before a next step would schedule it with nothing left to compute."""
        check_pooling_params(self.pooling_model, params)
        checked = self.inputs.process_pooling(request_id, prompt, params.truncate_prompt_tokens, priority,
                                              self.requests)
        token_ids, arrival = checked.token_ids, time.time() if arrival_time is None else arrival_time
        sampling = SamplingParams()  # read by nothing: the sequence samples no token
        seq = Sequence(request_id=request_id, index=0, token_ids=list(token_ids), num_prompt_tokens=len(token_ids),
                       params=sampling, max_tokens=0, arrival_time=arrival, priority=priority, tenant=tenant,
                       cache_salt=b"" if tenant is None else salt_bytes(tenant.salt),
                       pooled=PooledPrompt(params, self.pooling_model))
        self.requests[request_id] = RequestState(
            request_id=request_id, prompt=checked.prompt, prompt_token_ids=list(token_ids), params=sampling,
            metrics=RequestMetrics(arrival_time=arrival),
            completions=[CompletionState(seq, IncrementalDetokenizer(self.tokenizer, [], sampling))],
        )
        self._synchronous_requests.add(request_id)
        self.scheduler.add(seq)
        self.prompt_tokens_total += len(token_ids)
        self._idle_at_masks_done = None
    # ---- LoRA adapters ---------------------------------------------------------------
    def read_lora(self, lora_request: LoRARequest) -> LoRAAdapter:
        """``lora_request``'s adapter read from its folder and checked against the model, not loaded yet: the
        slow part of :meth:`add_lora`, safe to run on another thread than the engine's."""
        self._require_lora(lora_request.lora_name)
        lora = self.config.lora
        return read_adapter(lora_request, self.runner.model.lora.targets, lora.max_lora_rank)

    def install_lora(self, adapter: LoRAAdapter) -> None:
        """Load an adapter :meth:`read_lora` read, between steps (see :class:`LoadedAdapters` for the limit)."""
        self._require_lora(adapter.name)
        self.adapters.add(adapter)

    def add_lora(self, lora_request: LoRARequest) -> None:
        """Load ``lora_request``'s adapter so that requests may name it; the same name and folder again is a
        no-op. Past max_cpu_loras the least recently used idle adapter is unloaded, or LoRACapacityError raised."""
        self._require_lora(lora_request.lora_name)
        if self.adapters.holds(lora_request):
            self.adapters.add(self.adapters.lookup(lora_request))  # used now
            return
        self.install_lora(self.read_lora(lora_request))

    def remove_lora(self, lora_name: str, on_unloaded: Callable[[], None] | None = None) -> None:
        """Unload adapter ``lora_name`` once its requests have finished, refusing new ones from now on; then
        ``on_unloaded`` is called (at once if it has none running). LoRAAdapterNotFoundError for an unknown name."""
        self._require_lora(lora_name)
        lora_int_id = next((request.lora_int_id for request in self.adapters.requests()
                            if request.lora_name == lora_name), None)

        def unloaded() -> None:
            if lora_int_id is not None:
                self.scheduler.adapter_turns.forget(lora_int_id)
            if on_unloaded is not None:
                on_unloaded()

        self.adapters.remove(lora_name, unloaded)

    def list_loras(self) -> list[LoRARequest]:
        """The loaded adapters requests may name (not those being unloaded); none without enable_lora."""
        return [] if self.adapters is None else self.adapters.requests()

    def _require_lora(self, lora_name: str) -> None:
        if self.adapters is None:
            raise LoRAAdapterError(f"LoRA adapter {quote_value(lora_name)} cannot be loaded: this engine was "
                                   "started without enable_lora")

    def _new_constraint(self, params: SamplingParams) -> SequenceConstraint | None:
        """What limits one of the request's sequences: a fresh grammar state (the grammar compiled now, a cache
        hit if the server did it) and a fresh thinking state, as the request asks."""
        grammar = None if params.structured_outputs is None else self.grammars.new_state(params.structured_outputs)
        thinking = None if params.thinking is None else ThinkingState(params.thinking)
        return new_constraint(grammar, thinking, self.model_config.vocab_size)

    def _sequence_seed(self, params: SamplingParams, index: int) -> int:
        """The seed of a completion's draws: ``seed + index`` for a seeded request (n > 1 completions
        differ), else one drawn from this engine's own stream."""
        if params.seed is None:
            return self.request_seeds.getrandbits(63)
        return (params.seed + index) % 2**64

    def abort_request(self, request_id: str) -> bool:
        """Stop a request now and free its blocks; False if it is unknown or already done."""
        state = self.requests.get(request_id)
        if state is None:
            return False
        self._forget(request_id)
        for completion in state.completions:
            if completion.finish_reason is None:
                completion.finish_reason = "abort"
            self.scheduler.finish(completion.seq)
        self._idle_at_masks_done = None  # its blocks are free for others
        state.metrics.finished_time = time.time()
        return True

    def _forget(self, request_id: str) -> None:
        """Drop a finished or aborted request."""
        del self.requests[request_id]
        self._synchronous_requests.discard(request_id)
        if (adapter_name := self._request_adapters.pop(request_id, None)) is not None:
            self.adapters.release(adapter_name)

    def has_unfinished_requests(self) -> bool:
        """Whether a step has work, or outputs to hand out that a failed step held over."""
        return bool(self.requests or self._carried_outputs)

    def has_work_to_step(self) -> bool:
        """Unfinished requests, unless the last step found none it could run and no mask has been computed
        since (nor a request added or aborted): then a step would find nothing again, and a driver may sleep
        until :meth:`notify_when_mask_ready` calls. Outputs a failed step held over are work too."""
        if self._carried_outputs:
            return True
        return bool(self.requests) and self._idle_at_masks_done != self.grammars.workers.num_done

    @property
    def num_requests(self) -> int:
        return len(self.requests)

    def get_stats(self) -> EngineStats:
        num_running = len({seq.request_id for seq in self.scheduler.running})
        return EngineStats(
            num_running=num_running,
            num_waiting=len(self.requests) - num_running,
            kv_cache_usage=self.block_manager.usage,
            kv_cache_dtype=self.config.cache.kv_cache_dtype,
            kv_cache_capacity_tokens=self.block_manager.num_blocks * self.block_manager.block_size,
            kv_cache_bytes_per_token=self.kv_bytes_per_token,
            prefix_cache_queries=self.block_manager.prefix_cache_queries,
            prefix_cache_hits=self.block_manager.prefix_cache_hits,
            num_preemptions=self.scheduler.num_preemptions,
            prompt_tokens_total=self.prompt_tokens_total,
            generation_tokens_total=self.generation_tokens_total,
            tensor_parallel_size=self.config.parallel.tensor_parallel_size,
            num_failed_steps=self.num_failed_steps,
            spec_decode=self.spec_decode_stats.snapshot() if self.proposer is not None else None,
            kv_tiers=self.kv_offload.stats() if self.kv_offload is not None else [],
        )

    def enable_profiling(self) -> StepProfiler:
        """From now on, time each step's phases (``bench --profile``); read them from the returned profiler."""
        self.profiler = StepProfiler(self.device)
        self.runner.enable_profiling(self.profiler)
        return self.profiler

    # ---- the step -------------------------------------------------------------------
    def step(self) -> list[RequestOutput | PoolingRequestOutput]:
        """Run one forward pass and return what each request hands out now (see RequestOutputKind).

        Under async scheduling the next step is launched before this one's tokens are read, and stays
        in flight between calls (see :mod:`autoglm.engine.async_scheduling`).

        A step that raises ends only the request that caused it, found as :mod:`step_isolation` says:
        RequestsFailedError names it once found; until then the step hands out nothing.
        """
        isolated = self.scheduler.isolated_request = self.isolation.isolated
        generated = self._num_generated(isolated)
        if self._in_flight is None and not self._microbatches and self.kernel_switch.pending \
                and self.kernel_switch.at_step_boundary(self._begun_requests()):
            self._prepare_kernels()
        try:
            with cpu_kernels_in_use(self.kernel_switch.in_use):
                outputs = self._carried_outputs + self._step()
            self._carried_outputs = []
        except EngineBrokenError:
            raise
        except Exception as error:
            return self._step_failed(error, isolated)
        if isolated is not None and self._num_generated(isolated) != generated:
            self.isolation.clear(isolated)  # it gained a token (or ended) alone without failing
        return outputs

    def _num_generated(self, request_id: str | None) -> int:
        """Tokens a request's completions hold; -1 once it has ended (or for no request)."""
        state = self.requests.get(request_id) if request_id is not None else None
        return -1 if state is None else sum(c.seq.num_output_tokens for c in state.completions)

    def _step_failed(self, error: Exception, isolated: str | None) -> list[RequestOutput]:
        """Restart what was running from a known state and end the request that caused the failure,
        or, if the step held several, run each of them alone to find it."""
        self.num_failed_steps += 1
        suspects = self._restart_running()
        for state in [state for state in self.requests.values() if state.finished]:
            self._forget(state.request_id)
            if (output := take_output(state)) is not None:
                self._carried_outputs.append(output)
        if isolated is not None:
            culprits = [isolated]
        elif len(suspects) > 1:
            logger.warning("a step of requests %s failed (%s: %s); running each alone to find the cause",
                           ", ".join(suspects), type(error).__name__, error)
            self.isolation.suspect(suspects)
            return []
        else:  # one request ran; or none, when the step failed before any was running: then all end
            culprits = suspects or list(self.requests)
        if not culprits:
            return []
        for request_id in culprits:
            self.isolation.clear(request_id)
            self.abort_request(request_id)
        raise RequestsFailedError(culprits, error) from error

    def _restart_running(self) -> list[str]:
        """Every running sequence computes its KV again from the start, the failed step (and any step in
        flight after it) forgotten; the ids of their requests, in order."""
        self._in_flight = None
        self._microbatches.drain()
        self.encoded_images.forget_all()
        if self.adapter_slots is not None:
            self.adapter_slots.forget_all()
        requeued = self.scheduler.requeue_running()
        for seq in requeued:
            if seq.last_token_pending:
                seq.token_ids.pop()
                seq.last_token_pending = False
            self._restart_prompt_logprobs(seq)
            # The failed step may have hashed the block of a last token whose successor never came:
            # as after any step, the last token is left to compute, so its block is not looked up.
            del seq.block_hashes[(seq.num_tokens - 1) // self.block_manager.block_size:]
        return list(dict.fromkeys(seq.request_id for seq in requeued if seq.request_id in self.requests))

    def _step(self) -> list[RequestOutput]:
        if self._microbatches.depth > 1:
            return self._pipelined_step()
        with self.profiler.step():
            current, self._in_flight = self._in_flight, None
            if current is None:
                masks_done = self.grammars.workers.num_done
                current = self._launch(previous=None)
                self._idle_at_masks_done = masks_done if current is None else None
                if current is None:
                    return []
                current.advance()
            if self._overlaps():
                self._in_flight = self._launch(previous=current)
            outputs = self._complete(current)
            self._last_step_s = time.perf_counter() - self._scheduled_at
            if self._in_flight is not None:
                self._in_flight.advance()
                if self._in_flight.is_void:  # every row's sequence finished meanwhile: nothing left to read
                    self._in_flight = None
            return outputs

    def _pipelined_step(self) -> list[RequestOutput]:
        """Launch steps until one per pipeline stage is in flight (or none more can be scheduled), then read the
        oldest: meanwhile the stages before the last run the newer ones (see ``pipeline_parallel``)."""
        with self.profiler.step():
            masks_done = self.grammars.workers.num_done
            while not self._microbatches.full and (launched := self._launch(previous=None)) is not None:
                launched.advance()
                self._microbatches.push(launched)
            self._idle_at_masks_done = None if self._microbatches else masks_done
            if not self._microbatches:
                return []
            outputs = self._complete(self._microbatches.pop())
            self._last_step_s = time.perf_counter() - self._scheduled_at
            return outputs

    def _overlaps(self) -> bool:
        """Whether the next step may be launched before the current one's tokens are read."""
        return self.async_scheduling and self.proposer is None and not self._synchronous_requests

    def _launch(self, previous: LaunchedStep | None) -> LaunchedStep | None:
        """Schedule a step and launch it on the device; None when nothing is scheduled. ``previous``: the
        step in flight, whose sampled tokens this one's plan reads on the device."""
        with self.profiler.phase(SCHEDULE):
            self.grammars.workers.wait_for_fresh(self._last_step_s)
            self._scheduled_at = time.perf_counter()
            batch = self.scheduler.schedule()
        for seq in batch.preempted:
            self._restart_prompt_logprobs(seq)
        if not batch.seqs:
            return None
        proposals = self._propose(batch)
        planned = build_step_plan(batch.seqs, batch.num_new_tokens, self.config.cache.block_size, self.eos_token_ids,
                                  proposals, previous.planned if previous else None)
        planned.plan.use_cpu_kernels = self.kernel_switch.in_use
        if self.adapter_slots is not None:
            planned.plan.lora_slots, planned.plan.lora_loads = self.adapter_slots.assign(
                [seq.adapter for seq in planned.seqs])
        if self.kv_offload is not None:
            planned.plan.kv_transfers = self.kv_offload.take_transfers()
        self.encoded_images.plan(planned, self._unfinished_seqs())
        return LaunchedStep(batch, planned, self.runner.launch(planned.plan), proposals)

    def _unfinished_seqs(self) -> list[Sequence]:
        """Every sequence still to run, waiting, running or not yet queued (n > 1 completions)."""
        return [completion.seq for state in self.requests.values() for completion in state.completions
                if not completion.seq.is_finished]

    def _complete(self, launched: LaunchedStep) -> list[RequestOutput]:
        """Read a launched step's tokens (waiting for them if need be) and hand them to the sequences."""
        output = launched.pending.result()
        with self.profiler.phase(OUTPUTS):
            return self._process_result(launched.batch, step_result(launched.planned, output), launched.proposals)

    def _lookahead(self, seq: Sequence) -> int:
        return max_lookahead(seq, self.config.speculative.num_speculative_tokens, self.max_context_len)

    def _propose(self, batch: ScheduledBatch) -> dict[Sequence, list[int]]:
        """Proposed tokens for the sequences the scheduler gave lookahead slots; none without a proposer."""
        seqs = [seq for seq, slots in zip(batch.seqs, batch.num_lookahead_tokens) if slots]
        if not seqs:
            return {}
        lengths = [slots for slots in batch.num_lookahead_tokens if slots]
        return {seq: proposed for seq, proposed in zip(seqs, self.proposer.propose(seqs, lengths)) if proposed}

    def _process_result(self, batch: ScheduledBatch, result: StepResult,
                        proposals: dict[Sequence, list[int]]) -> list[RequestOutput]:
        """Cache each scheduled sequence's full blocks (the step's tokens already count as computed, see
        LaunchedStep.advance), and append and detokenize new tokens: under speculative decoding the
        proposals the target kept, then its own next token. Sequences finished or aborted since the
        step was launched are passed over."""
        now = time.time()
        touched: dict[str, RequestState] = {}
        for seq in batch.seqs:
            if seq.is_finished:
                continue
            self.block_manager.cache_full_blocks(seq)
            state = self.requests[seq.request_id]
            if state.metrics.first_scheduled_time is None:
                state.metrics.first_scheduled_time = now
            touched[seq.request_id] = state
        for seq, entries in result.prompt_logprobs.items():
            if seq.is_finished:
                continue
            state = self.requests[seq.request_id]
            state.prompt_logprobs.extend(entries)
            seq.needs_prompt_logprobs = len(state.prompt_logprobs) < seq.num_prompt_tokens
        pooled = [self._pool(seq, part, starts_prompt, now) for seq, (part, starts_prompt) in result.pooled.items()
                  if not seq.is_finished]
        for seq, drawn in result.sampled.items():
            if seq.is_finished:
                continue
            state = self.requests[seq.request_id]
            if seq.index == 0 and state.pending_children:
                self._start_children(state)
            proposed = proposals.get(seq, [])
            accepted = num_accepted(proposed, [entry.token_id for entry in drawn])
            self.spec_decode_stats.record(len(proposed), accepted)
            completion = state.completions[seq.index]
            delivered = 0
            for entry in drawn[: accepted + 1]:  # stops at a stop, EOS or max_tokens among them
                self._append_token(state, completion, entry, now)
                delivered += 1
                if completion.finish_reason is not None:
                    break
            self.fair_share.charge_kept_proposals(seq, delivered - 1)
            if accepted and completion.finish_reason is None:
                seq.num_computed_tokens += accepted  # the kept proposals' K/V, computed by this step
                self.block_manager.cache_full_blocks(seq)
        for seq, slots in zip(batch.seqs, batch.num_lookahead_tokens):
            if slots and not seq.is_finished:
                self.block_manager.release_lookahead(seq)
        outputs = [*filter(None, pooled), *(output for state in touched.values()
                                            if (output := take_output(state)) is not None)]
        for state in touched.values():
            if state.finished:
                self._forget(state.request_id)
        return outputs

    def _pool(self, seq: Sequence, part: torch.Tensor | None, starts_prompt: bool,
              now: float) -> PoolingRequestOutput | None:
        """Fold a chunk's share into a pooling sequence's vector; once its prompt is read, finish it (its blocks
        freed now) and return its output."""
        seq.pooled.add(part, starts_prompt)
        if seq.num_computed_tokens < seq.num_prompt_tokens:
            return None
        state = self.requests[seq.request_id]
        state.completions[0].finish_reason = "stop"
        self.scheduler.finish(seq)
        state.metrics.first_token_time = state.metrics.finished_time = now
        return pooled_output(state)

    def _start_children(self, state: RequestState) -> None:
        """n > 1: queue the other completions now that the first has read the prompt; each takes
        the prompt's blocks when admitted (see :meth:`BlockManager.find_cached_prefix`)."""
        for child in state.pending_children:
            self.scheduler.add(child)
        state.pending_children = []

    def _restart_prompt_logprobs(self, seq: Sequence) -> None:
        """A preempted sequence scores its prompt again from the start if it had not finished:
        the runner scores every prompt position it recomputes while some are missing."""
        if seq.needs_prompt_logprobs:
            self.requests[seq.request_id].prompt_logprobs = [None]

    def _append_token(self, state: RequestState, completion: CompletionState, sampled: SampledToken,
                      now: float) -> None:
        seq, params = completion.seq, state.params
        token_id = sampled.token_id
        seq.append_token(token_id)
        self.generation_tokens_total += 1
        if state.metrics.first_token_time is None:
            state.metrics.first_token_time = now
        state.metrics.last_token_time = now
        if completion.logprobs is not None:
            completion.logprobs.append(sampled.logprobs)
            completion.cumulative_logprob += sampled.logprob
        stop_string = completion.detokenizer.add_tokens([token_id])
        reason, stop_reason = self._finish_reason(seq, params, token_id, stop_string)
        if reason is None and seq.constraint is not None:  # an ended sequence needs no mask after its last token
            seq.constraint.accept(token_id)
        if reason is not None:
            completion.finish_reason, completion.stop_reason = reason, stop_reason
            self.scheduler.finish(seq)
            if state.finished:
                state.metrics.finished_time = now
        if seq.constraint is not None and state.request_id in self._synchronous_requests \
                and overlaps_again(params, (c.seq for c in state.completions)):
            self._synchronous_requests.discard(state.request_id)
        if text := completion.detokenizer.take_delta(finished=reason is not None):
            completion.text_pieces.append(text)

    def _finish_reason(self, seq: Sequence, params: SamplingParams, token_id: int,
                       stop_string: str | None) -> tuple[str | None, str | int | None]:
        if seq.constraint is not None and seq.constraint.terminates(token_id):  # a grammar's stop, ignore_eos or not
            return "stop", None
        if seq.num_output_tokens >= params.min_tokens:
            if token_id in params.stop_token_ids:
                return "stop", token_id
            if token_id in self.eos_token_ids and not params.ignore_eos:
                return "stop", None
            if stop_string is not None:
                return "stop", stop_string
        if seq.num_output_tokens >= seq.max_tokens or seq.num_tokens >= self.max_context_len:
            return "length", None
        return None, None
