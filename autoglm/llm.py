"""The offline facade: ``LLM(model=...).generate(prompts, params)``."""
from __future__ import annotations

import itertools
from collections.abc import Callable
from collections.abc import Sequence as SequenceABC
from dataclasses import replace
from functools import partial

from tqdm.auto import tqdm

from autoglm.config import AutoGLMConfig
from autoglm.engine.tokenize import Prompt
from autoglm.engine.llm_engine import LLMEngine
from autoglm.errors import InvalidRequestError, quote_value
from autoglm.engine.pooling.requests import check_pooling_params
from autoglm.engine.pooling.pair_prompts import cosine_scores, pair_prompt, score_pairs
from autoglm.outputs import (
    ClassificationRequestOutput,
    EmbeddingRequestOutput,
    PoolingRequestOutput,
    RequestOutput,
    ScoringRequestOutput,
)
from autoglm.lora_request import LoRARequest
from autoglm.pooling_params import PoolingParams
from autoglm.sampling_params import RequestOutputKind, SamplingParams


def _as_prompt_list(prompts: Prompt | SequenceABC[Prompt]) -> list[Prompt]:
    """One prompt (text or token ids) or many, always as a list."""
    if isinstance(prompts, str):
        return [prompts]
    prompts = list(prompts)
    if prompts and all(isinstance(t, int) for t in prompts):
        return [prompts]
    return prompts


def _per_prompt_adapters(lora_request: LoRARequest | SequenceABC[LoRARequest | None] | None,
                         num_prompts: int) -> list[LoRARequest | None]:
    """One adapter (or None) per prompt, from one for all or a list of one per prompt."""
    if lora_request is None or isinstance(lora_request, LoRARequest):
        return [lora_request] * num_prompts
    adapters = list(lora_request) if isinstance(lora_request, (list, tuple)) else [lora_request]
    wrong = [adapter for adapter in adapters if adapter is not None and not isinstance(adapter, LoRARequest)]
    if wrong:
        raise InvalidRequestError(f"lora_request must be a LoRARequest, None, or a list of them; got "
                                  f"{quote_value(wrong[0])}")
    if len(adapters) != num_prompts:
        raise InvalidRequestError(f"got {len(adapters)} LoRA requests for {num_prompts} prompts; give one, or one "
                                  "per prompt (None for the base model)")
    return adapters


def _priorities(priority: SequenceABC[int] | None, num_prompts: int) -> list[int]:
    """One priority per prompt; none given: 0 for each."""
    priorities = list(priority) if priority is not None else [0] * num_prompts
    if len(priorities) != num_prompts:
        raise InvalidRequestError(f"got {len(priorities)} priorities for {num_prompts} prompts; give one per prompt")
    return priorities


class LLM:
    """Runs batches of prompts to completion through one :class:`LLMEngine`.

    Every :class:`AutoGLMConfig` field is accepted as a keyword. With ``tensor_parallel_size`` above 1
    it starts worker processes: use it as a context manager, or call :meth:`close`, to stop them early.
    """

    def __init__(self, model: str | None = None, **settings) -> None:
        self._start(AutoGLMConfig(model=model, **settings))

    @classmethod
    def from_config(cls, config: AutoGLMConfig) -> "LLM":
        llm = cls.__new__(cls)
        llm._start(config)
        return llm

    def _start(self, config: AutoGLMConfig) -> None:
        self.config = config
        self.engine = LLMEngine(config.engine_config())
        self.engine.wait_for_cpu_kernels()  # before the first step, so that no request sees a switch
        self._request_counter = itertools.count()

    def get_tokenizer(self):
        return self.engine.tokenizer

    def close(self) -> None:
        """Stop the tensor-parallel workers now rather than when this LLM is collected or the process exits."""
        self.engine.close()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def generate(
        self,
        prompts: Prompt | SequenceABC[Prompt],
        sampling_params: SamplingParams | SequenceABC[SamplingParams] | None = None,
        use_tqdm: bool | Callable[..., tqdm] = True,
        priority: SequenceABC[int] | None = None,
        lora_request: LoRARequest | SequenceABC[LoRARequest | None] | None = None,
    ) -> list[RequestOutput]:
        """Generate for every prompt; outputs come back in input order.

        ``lora_request`` names the LoRA adapter every prompt runs with, or one per prompt (None: the base
        model); an adapter not loaded yet is loaded first (the engine needs ``enable_lora``, and ``max_cpu_loras``
        at least the distinct adapters of the call, else LoRACapacityError).

        ``use_tqdm`` shows a bar of requests finished, or is what makes the bar, given its ``total``
        (``functools.partial(tqdm, desc=...)``): a caller names what its requests do.
        """
        prompt_list = _as_prompt_list(prompts)
        if sampling_params is None or isinstance(sampling_params, SamplingParams):
            params_list = [sampling_params or SamplingParams()] * len(prompt_list)
        else:
            params_list = list(sampling_params)
            if len(params_list) != len(prompt_list):
                raise InvalidRequestError(
                    f"got {len(params_list)} SamplingParams for {len(prompt_list)} prompts; give one, or one per prompt"
                )
        priorities = _priorities(priority, len(prompt_list))
        final_only = [replace(params, output_kind=RequestOutputKind.FINAL_ONLY) for params in params_list]
        adapters = _per_prompt_adapters(lora_request, len(prompt_list))
        return self._run(prompt_list, final_only, priorities, use_tqdm, "generate", adapters)

    def encode(
        self,
        prompts: Prompt | SequenceABC[Prompt],
        pooling_params: PoolingParams | None = None,
        use_tqdm: bool | Callable[..., tqdm] = True,
        priority: SequenceABC[int] | None = None,
    ) -> list[PoolingRequestOutput]:
        """Pool every prompt into one vector (see :class:`PoolingParams`); outputs come back in input order.
        Needs a pooling model: one that embeds, classifies or scores (the ``runner`` setting)."""
        prompt_list = _as_prompt_list(prompts)
        params = pooling_params or PoolingParams()
        return self._run(prompt_list, [params] * len(prompt_list), _priorities(priority, len(prompt_list)), use_tqdm,
                         params.task)

    def embed(self, prompts: Prompt | SequenceABC[Prompt], pooling_params: PoolingParams | None = None,
              truncate_prompt_tokens: int | None = None,
              use_tqdm: bool | Callable[..., tqdm] = True) -> list[EmbeddingRequestOutput]:
        """Each prompt's embedding, normalised unless the params or the ``normalize`` setting say otherwise."""
        params = replace(pooling_params or PoolingParams(), task="embed")
        if truncate_prompt_tokens is not None:
            params = replace(params, truncate_prompt_tokens=truncate_prompt_tokens)
        return [EmbeddingRequestOutput.from_base(output) for output in self.encode(prompts, params, use_tqdm)]

    def classify(self, prompts: Prompt | SequenceABC[Prompt],
                 use_tqdm: bool | Callable[..., tqdm] = True) -> list[ClassificationRequestOutput]:
        """Each prompt's class logits and probabilities, from a sequence-classification model."""
        outputs = self.encode(prompts, PoolingParams(task="classify"), use_tqdm)
        return [ClassificationRequestOutput.from_base(output) for output in outputs]

    def score(self, text_1: str | SequenceABC[str], text_2: str | SequenceABC[str],
              truncate_prompt_tokens: int | None = None,
              use_tqdm: bool | Callable[..., tqdm] = True) -> list[ScoringRequestOutput]:
        """The relevance of each (text_1, text_2) pair (one text_1 against every text_2, or the lists item by
        item): a classifier's sigmoid score of the pair, or an embedding model's cosine of the two texts."""
        pairs = score_pairs(text_1, text_2)
        model = self.engine.pooling_model
        params = PoolingParams(task="score", truncate_prompt_tokens=truncate_prompt_tokens)
        check_pooling_params(model, replace(params, task="embed") if model and model.kind == "embed" else params)
        if model.kind == "embed":
            embedded = self.encode([text for pair in pairs for text in pair], replace(params, task="embed"), use_tqdm)
            scores = cosine_scores([output.outputs.data for output in embedded[0::2]],
                                   [output.outputs.data for output in embedded[1::2]])
            return [ScoringRequestOutput(first.request_id, score, first.prompt_token_ids + second.prompt_token_ids)
                    for first, second, score in zip(embedded[0::2], embedded[1::2], scores)]
        prompts = [pair_prompt(self.engine.tokenizer, model, *pair) for pair in pairs]
        return [ScoringRequestOutput.from_base(output) for output in self.encode(prompts, params, use_tqdm)]

    def _run(self, prompts: list[Prompt], params_list: SequenceABC[SamplingParams | PoolingParams],
             priorities: list[int], use_tqdm: bool | Callable[..., tqdm], desc: str,
             adapters: list[LoRARequest | None] | None = None) -> list:
        """Queue every prompt (with its LoRA adapter, if any), step until all have finished, and return their
        outputs in input order; whatever is left (an error midway) is aborted."""
        request_ids: list[str] = []
        try:
            for prompt, params, prio, adapter in zip(prompts, params_list, priorities,
                                                     adapters or [None] * len(prompts)):
                if adapter is not None:  # loaded as its first request comes, so none of those before is unloaded
                    self.engine.add_lora(adapter)
                request_id = str(next(self._request_counter))
                self.engine.add_request(request_id, prompt, params, priority=prio, lora_request=adapter)
                request_ids.append(request_id)
            finished: dict[str, RequestOutput | PoolingRequestOutput] = {}
            make_bar = use_tqdm if callable(use_tqdm) else partial(tqdm, desc=desc, unit="req", disable=not use_tqdm)
            with make_bar(total=len(request_ids)) as bar:
                while len(finished) < len(request_ids):
                    for output in self.engine.step():
                        if output.finished:
                            if isinstance(output, RequestOutput):
                                self._decode_logprob_tokens(output)
                            finished[output.request_id] = output
                            bar.update(1)
                    self.engine.wait_for_work()
            return [finished[request_id] for request_id in request_ids]
        finally:
            for request_id in request_ids:
                self.engine.abort_request(request_id)

    def _decode_logprob_tokens(self, output: RequestOutput) -> None:
        """Fill in each log-prob's token text, which the engine leaves to whoever reads it."""
        positions = [*(output.prompt_logprobs or []), *(p for c in output.outputs for p in c.logprobs or [])]
        for position in positions:
            for token_id, logprob in (position or {}).items():
                logprob.decoded_token = self.engine.tokenizer.decode([token_id])


class OpenAutoGLM(LLM):
    """The project's original entry point: ``OpenAutoGLM.from_config(AutoGLMConfig(...))``."""
