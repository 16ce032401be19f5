"""One engine step on the device: a step plan in, forward, logits of the tokens that matter, sampling, arrays out
(at once, or launched and read later under async scheduling)."""
from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch import nn

from autoglm.attention import Attention, AttentionBackend, ForwardContext, select_attention_backend
from autoglm.attention.kv_cache_format import AUTO, KVCacheFormat
from autoglm.distributed.pipeline_state import pipeline_stage
from autoglm.models.fused_experts import FusedExperts
from autoglm.models.linear import Linear
from autoglm.models.lora import NO_SLOT, LoRASlots, read_adapter
from autoglm.profiling import ATTENTION, FORWARD, LINEAR, NO_PROFILER, PREPARE, SAMPLE, NullProfiler, StepProfiler
from autoglm.runner.encoder_cache import EncoderCache
from autoglm.runner.kv_cache import allocate_kv_cache, attention_layers
from autoglm.runner.kv_tiers.host_area import HostBlockArea
from autoglm.runner.padded_decode import PaddedDecode, PaddedDecodeSettings
from autoglm.runner.pending_output import PendingStepOutput
from autoglm.runner.pooler import pool_chunks
from autoglm.runner.sampler import Sampler, SamplingBatch
from autoglm.device_transfer import tensor_to_device, to_device
from autoglm.step_output import ScoredPrompt, StepOutput
from autoglm.step_plan import PromptScoring, StepPlan

logger = logging.getLogger(__name__)


class ModelRunner:
    """Owns the model, its KV pool, its attention backend and the sampler on one device."""

    def __init__(self, model: nn.Module, device: torch.device, dtype: torch.dtype, block_size: int,
                 num_blocks: int, vocab_size: int, attention_backend: AttentionBackend | None = None,
                 kv_format: KVCacheFormat = AUTO, padded_decode: PaddedDecodeSettings | None = None) -> None:
        self.model = model
        self.device = device
        self.block_size = block_size
        self.vocab_size = vocab_size
        # Padded decode rows write to one block past those the block manager hands out.
        scratch_blocks = 1 if padded_decode else 0
        self.kv_pool = allocate_kv_cache(model, num_blocks + scratch_blocks, block_size, dtype, device, kv_format)
        self.forward_context = ForwardContext(attention_backend or select_attention_backend(device, dtype))
        for layer in attention_layers(model):
            layer.forward_context = self.forward_context
        if padded_decode and padded_decode.capture_graphs and not self.attention_backend.supports_graph_capture:
            logger.warning("the %s attention backend cannot run under graph capture: decode steps run eagerly",
                           self.attention_backend.name)
            padded_decode = None
        self.padded_decode = PaddedDecode(model, self.forward_context, padded_decode, num_blocks, block_size,
                                          device) if padded_decode else None
        # A vision-language model's encoded images, kept between the steps that read them.
        self.encoder_cache = (EncoderCache(model.encode_images, device) if getattr(model, "encodes_images", False)
                              else None)
        # A model with LoRA slots (see models.lora.enable_lora): the plan says which adapter each row runs with.
        self.lora: LoRASlots | None = getattr(model, "lora", None)
        self.sampler = Sampler()
        self.profiler: NullProfiler | StepProfiler = NO_PROFILER
        self._last_sampled: torch.Tensor | None = None  # the previous step's sampled ids, on the device
        # Called with each plan and its final hidden states [T, hidden], for a proposer that reads them (MTP).
        self.hidden_states_sink: Callable[[StepPlan, torch.Tensor], None] | None = None
        # The host KV tier the plans' block moves go to and come from (kv_offload_bytes); None: no tiers.
        self.host_tier: HostBlockArea | None = None

    @property
    def attention_backend(self) -> AttentionBackend:
        return self.forward_context.backend

    def enable_profiling(self, profiler: StepProfiler) -> None:
        """Time this runner's phases, and attention and linear layers (a layer of routed experts counts as
        linear) inside the forward: every step then runs layer by layer, since the native decode step has no
        layers to time."""
        if hasattr(self.model, "enable_native_decode"):
            self.model.enable_native_decode(0)
        profiler.attach(self.model, {Attention: ATTENTION, Linear: LINEAR, FusedExperts: LINEAR})
        profiler.count_linear_paths(self.model)
        self.profiler = profiler

    def execute(self, plan: StepPlan) -> StepOutput:
        """Run ``plan`` and wait for its output."""
        return self.launch(plan).result()

    @torch.inference_mode()
    def launch(self, plan: StepPlan) -> PendingStepOutput:
        """Queue ``plan``'s forward and sampling on the device; its sampled ids stay there for the next plan's
        deferred tokens, and their copy to the host is under way when this returns. On CUDA nothing here
        waits for the device unless the plan scores prompt positions."""
        profiler = self.profiler
        if plan.kv_transfers is not None:
            if self.host_tier is None:
                raise ValueError("the plan moves KV blocks to or from the host tier, but this runner has none")
            self.host_tier.apply(plan.kv_transfers)  # before the forward pass reads or overwrites those blocks
        adapters = any(slot != NO_SLOT for slot in plan.lora_slots)
        # Decode graphs were captured without adapters: a step with adapter rows runs eagerly.
        serves = self.padded_decode and self.padded_decode.serves(plan) and not adapters
        padded = self.padded_decode if serves else None
        with profiler.phase(PREPARE):
            if self.lora is not None:
                self._prepare_adapters(plan)
            if padded:
                input_ids, positions, metadata = padded.prepare(plan)
            else:
                input_ids = tensor_to_device(plan.input_ids, self.device)
                rotary_positions = plan.positions if plan.mrope_positions is None else plan.mrope_positions
                positions = tensor_to_device(rotary_positions, self.device)
                metadata = self.attention_backend.build_metadata(plan, self.device)
            self._fill_deferred(plan, input_ids)
            self._last_sampled = None  # until this step samples
        with profiler.phase(FORWARD):
            images = self.encoder_cache.step_embeddings(plan) if self.encoder_cache is not None else None
        with profiler.phase(FORWARD), self.forward_context.step(metadata):
            if padded:
                hidden = padded.forward(input_ids, positions)
            elif images is None:
                hidden = self.model(input_ids, positions)
            else:
                hidden = self.model(input_ids, positions, images)
        if self.hidden_states_sink is not None:
            self.hidden_states_sink(plan, hidden)
        logit_tokens = plan.logit_tokens()
        output = StepOutput()
        if not pipeline_stage().is_last:  # a stage before the last has sent its stream on
            return PendingStepOutput(output)
        if plan.pooling:
            output.pooled = pool_chunks(self.model, hidden, plan.pooling)
        if not logit_tokens:
            return PendingStepOutput(output)
        with profiler.phase(FORWARD), profiler.forward_part(LINEAR):
            logits = self.model.compute_logits(hidden[to_device(logit_tokens, self.device)])
        with profiler.phase(SAMPLE):
            num_scored = len(logit_tokens) - len(plan.sample_tokens)
            first = 0
            for scoring in plan.prompt_scoring:
                count = len(scoring.target_token_ids)
                output.prompt_logprobs.append(_score_prompt(logits[first : first + count], scoring))
                first += count
            if not plan.sampling:
                return PendingStepOutput(output)
            batch = SamplingBatch.build(plan.sampling, self.vocab_size, self.device, plan.token_bitmask)
            sampled = self.sampler(logits[num_scored:], batch)
            self._last_sampled = sampled.token_ids
            return PendingStepOutput.copy_to_host(output, sampled)

    def _prepare_adapters(self, plan: StepPlan) -> None:
        """Install the plan's new adapters in their slots and group the step's tokens by slot. A worker reads an
        adapter from its folder: the engine's copy stays in the engine's process."""
        lora = self.lora
        for load in plan.lora_loads:
            lora.install(load.slot, load.adapter or read_adapter(load.request, lora.targets, lora.max_rank))
        lora.step.set(plan.token_lora_slots(), self.device)

    def _fill_deferred(self, plan: StepPlan, input_ids: torch.Tensor) -> None:
        """Fill the plan's placeholder tokens in ``input_ids`` (on the device) from the previous step's samples."""
        if plan.deferred_positions:
            if self._last_sampled is None:
                raise ValueError("the plan defers tokens to the previous step's samples, but no step has sampled yet")
            sources = to_device(plan.deferred_sources, self.device)
            input_ids[to_device(plan.deferred_positions, self.device)] = self._last_sampled[sources]


def _score_prompt(logits: torch.Tensor, scoring: PromptScoring) -> ScoredPrompt:
    """Log-probability and rank of each next prompt token given the tokens before it, and its top-N."""
    raw = torch.log_softmax(logits.float(), dim=-1)
    targets = torch.tensor(scoring.target_token_ids, device=raw.device)
    target_logprobs = raw.gather(1, targets.unsqueeze(1))
    ranks = ((raw > target_logprobs).sum(dim=-1) + 1).tolist()
    if scoring.num_top:
        top_values, top_ids = raw.topk(scoring.num_top, dim=-1)
        top_token_ids, top_logprobs = top_ids.tolist(), top_values.tolist()
    else:
        top_token_ids, top_logprobs = [[] for _ in ranks], [[] for _ in ranks]
    return ScoredPrompt(target_logprobs.squeeze(1).tolist(), ranks, top_token_ids, top_logprobs)
