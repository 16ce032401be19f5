"""Every check a request passes before it is queued, in one place: ``LLM``, ``LLMEngine.add_request``
and the server (through its async engine) all ask this, so their answers cannot disagree.

What only the request's own values decide (ranges, types) is checked by :class:`SamplingParams` as it
is made; what needs the model (its vocabulary, its context, the KV cache, the priority bound) is here.
"""
from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from autoglm.engine.errors import ContextLengthExceededError
from autoglm.engine.lora.loaded import LoadedAdapters
from autoglm.engine.prompt_images import PromptVision
from autoglm.engine.sched.block_manager import BlockManager
from autoglm.engine.tokenize import Prompt, PromptCharLimit, TokenizedPrompt, check_token_ids, encode_text
from autoglm.errors import InvalidRequestError, LoRAAdapterError, quote_value
from autoglm.lora_adapter import LoRAAdapter
from autoglm.lora_request import LoRARequest
from autoglm.models.image_input_spec import ImageInputSpec
from autoglm.multimodal import MultiModalPrompt
from autoglm.sampling_params import SamplingParams


@dataclass(frozen=True)
class CheckedRequest:
    """A request that passed every check: what the engine queues."""

    prompt: str | None  # the prompt's text; None if it came as bare ids
    token_ids: list[int]
    max_tokens: int  # new tokens it may generate, max_tokens or what the context leaves
    vision: PromptVision | None = None  # the prompt's images; None: text alone
    adapter: LoRAAdapter | None = None  # the LoRA adapter it runs with; None: the base model


class InputProcessor:
    """The model's limits a request must fit: its vocabulary, its context, the KV cache, the priority bound,
    the images it takes (``image_spec``; None: none) and the LoRA adapters loaded (``adapters``; None: LoRA off)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, vocab_size: int, max_context_len: int,
                 block_manager: BlockManager, max_abs_priority: int, image_spec: ImageInputSpec | None = None,
                 adapters: LoadedAdapters | None = None) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.max_context_len = max_context_len
        self.prompt_char_limit = PromptCharLimit.of(tokenizer, max_context_len)
        self._block_manager = block_manager
        self._max_abs_priority = max_abs_priority
        self._image_spec = image_spec
        self._adapters = adapters

    def check_params(self, params: SamplingParams) -> None:
        """The token ids the parameters name are in the vocabulary; the error names the parameter first."""
        params.check_vocab(self.vocab_size)

    def check_token_ids(self, token_ids: list[int], field: str) -> None:
        check_token_ids(token_ids, self.vocab_size, field)

    @staticmethod
    def check_request_id(request_id: str, open_requests: Container[str]) -> None:
        """A request id names one open request: its outputs and its abort go to that request alone."""
        if request_id in open_requests:
            raise InvalidRequestError(f"request id {quote_value(request_id)} is already in use")

    def check_prompt_text(self, text: str) -> None:
        """Refuse text longer than any context could hold before it is tokenized, which would only show that."""
        self.prompt_char_limit.check(text)

    def check_adapter(self, lora_request: LoRARequest | None) -> LoRAAdapter | None:
        """The loaded adapter a request names (None for the base model); LoRAAdapterNotFoundError if it is not
        loaded or is being unloaded, LoRAAdapterError if this engine serves no adapters."""
        if lora_request is None:
            return None
        if not isinstance(lora_request, LoRARequest):
            raise InvalidRequestError(f"lora_request must be a LoRARequest or None, got {quote_value(lora_request)}")
        if self._adapters is None:
            raise LoRAAdapterError(f"LoRA adapter {quote_value(lora_request.lora_name)} cannot be served: this engine "
                                   "was started without enable_lora", param="model")
        return self._adapters.lookup(lora_request)

    def process(self, request_id: str, prompt: Prompt, params: SamplingParams, priority: int,
                open_requests: Container[str], lora_request: LoRARequest | None = None) -> CheckedRequest:
        """``prompt`` tokenized (text in the caller's thread) and the request checked whole; bad input raises
        InvalidRequestError naming what is wrong and what is allowed. ``open_requests``: the ids in use."""
        self.check_request_id(request_id, open_requests)
        adapter = self.check_adapter(lora_request)
        self._check_priority(priority)
        text, token_ids, multi_modal = self._tokenize(prompt)
        vision = PromptVision.build(token_ids, multi_modal, self._image_spec)
        self.check_params(params)
        max_tokens = self._resolve_max_tokens(len(token_ids), params)
        blocks = self._block_manager.max_blocks_per_seq(len(token_ids) + max_tokens)
        if blocks > self._block_manager.num_blocks:
            raise InvalidRequestError(
                f"request needs {blocks} KV blocks ({len(token_ids)} prompt + {max_tokens} new tokens) but the "
                f"cache holds only {self._block_manager.num_blocks}; lower max_tokens or raise kv_cache_memory"
            )
        return CheckedRequest(text, token_ids, max_tokens, vision, adapter)

    def process_pooling(self, request_id: str, prompt: Prompt, truncate_prompt_tokens: int | None, priority: int,
                        open_requests: Container[str]) -> CheckedRequest:
        """A pooling request checked whole: it makes no new tokens, so its prompt may fill the context; one longer
        keeps its last ``truncate_prompt_tokens`` tokens (-1: as many as the context holds) where that is set."""
        self.check_request_id(request_id, open_requests)
        self._check_priority(priority)
        text, token_ids, multi_modal = self._tokenize(prompt)
        if multi_modal is not None:
            raise InvalidRequestError("a pooling request's prompt is text or token ids; images are not pooled")
        if truncate_prompt_tokens is not None:
            keep = self.max_context_len if truncate_prompt_tokens == -1 else truncate_prompt_tokens
            if keep > self.max_context_len:
                raise InvalidRequestError(f"truncate_prompt_tokens ({keep}) must not exceed this model's maximum "
                                          f"context length, {self.max_context_len} tokens (or be -1 for it)",
                                          param="truncate_prompt_tokens")
            token_ids = token_ids[-keep:]
        if len(token_ids) > self.max_context_len:
            raise ContextLengthExceededError(
                f"the input has {len(token_ids)} tokens but this model's maximum context length is "
                f"{self.max_context_len} tokens; shorten it, or set truncate_prompt_tokens to keep its last tokens"
            )
        blocks = self._block_manager.max_blocks_per_seq(len(token_ids))
        if blocks > self._block_manager.num_blocks:
            raise InvalidRequestError(f"the input needs {blocks} KV blocks ({len(token_ids)} tokens) but the cache "
                                      f"holds only {self._block_manager.num_blocks}; shorten it or raise kv_cache_memory")
        return CheckedRequest(text, token_ids, 0)

    def _tokenize(self, prompt: Prompt) -> tuple[str | None, list[int], MultiModalPrompt | None]:
        """The prompt's text (None if it came as bare ids), its checked token ids and its images; text is
        tokenized here, in the caller's thread, unless it is longer than any context could hold."""
        text: str | None = None
        multi_modal: MultiModalPrompt | None = None
        if isinstance(prompt, str):
            self.check_prompt_text(prompt)
            text, token_ids = prompt, encode_text(self.tokenizer, prompt)
        elif isinstance(prompt, TokenizedPrompt):
            text, token_ids, multi_modal = prompt.text, prompt.token_ids, prompt.multi_modal
        else:
            token_ids = prompt
        if not (isinstance(token_ids, (list, tuple)) and all(isinstance(t, int) for t in token_ids)):
            raise InvalidRequestError("prompt must be a string or a list of token ids")
        token_ids = list(token_ids)
        if not token_ids:
            raise InvalidRequestError("prompt is empty; give at least one token")
        self.check_token_ids(token_ids, "prompt")
        return text, token_ids, multi_modal

    def _check_priority(self, priority: int) -> None:
        """A bounded priority: aging lifts a waiting request by one level per aging period, so an
        unbounded one would let a single client run ahead of every other for good."""
        bound = self._max_abs_priority
        if not -bound <= priority <= bound:
            raise InvalidRequestError(
                f"priority must be in [-{bound}, {bound}] (the max_abs_priority setting), "
                f"got {quote_value(priority)}",
                param="priority",
            )

    def _resolve_max_tokens(self, num_prompt_tokens: int, params: SamplingParams) -> int:
        limit = self.max_context_len
        if num_prompt_tokens >= limit:
            raise ContextLengthExceededError(
                f"the prompt has {num_prompt_tokens} tokens but this model's maximum context length is "
                f"{limit} tokens, which leaves no room to generate"
            )
        if params.max_tokens is None:
            return limit - num_prompt_tokens
        if num_prompt_tokens + params.max_tokens > limit:
            raise ContextLengthExceededError(
                f"this model's maximum context length is {limit} tokens; however, you requested "
                f"{num_prompt_tokens + params.max_tokens} tokens ({num_prompt_tokens} in the prompt, "
                f"{params.max_tokens} in max_tokens); reduce the prompt or max_tokens"
            )
        return params.max_tokens
