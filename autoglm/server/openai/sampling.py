"""OpenAI request fields to SamplingParams, with range errors named as the request names them."""
from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from autoglm.errors import InvalidRequestError, quote_value
from autoglm.sampling_params import SamplingParams
from autoglm.server.openai.errors import APIError
from autoglm.server.openai.output_constraints import OutputConstraint
from autoglm.server.openai.protocol import ChatCompletionRequest, CompletionRequest, GenerationRequest

# The engine's check of parameters against its model (the vocabulary), raising InvalidRequestError.
ParamsCheck = Callable[[SamplingParams], None]

# Request fields that carry over to SamplingParams under the same name when given.
_SHARED_FIELDS = (
    "n", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "seed", "stop", "ignore_eos", "min_tokens", "stop_token_ids", "skip_special_tokens",
    "include_stop_str_in_output",
)


def completion_sampling_params(request: CompletionRequest, check_params: ParamsCheck, max_sequences: int,
                               constraint: OutputConstraint | None) -> SamplingParams:
    """``logprobs: N`` asks for N alternatives per token; with ``echo`` the prompt's too. `constraint`
    is what the output must match (from ``requested_constraint``).

    ``best_of`` candidates are generated per prompt and ranked by cumulative log-prob, so the engine
    records log-probs for them even when the request does not ask to see any.
    """
    best_of = num_candidates(request)
    if best_of < request.n:
        raise APIError(HTTPStatus.BAD_REQUEST, f"best_of must be >= n ({request.n}), got {best_of}",
                       param="best_of", code="invalid_value")
    _check_sequence_count(len(request.prompts), best_of, "best_of" if best_of > request.n else "n", max_sequences)
    if best_of > request.n and request.stream:
        raise APIError(HTTPStatus.BAD_REQUEST, "best_of cannot be used with stream: the best candidates are only "
                       "known once all have finished", param="best_of", code="invalid_value")
    logprobs = 0 if best_of > request.n and request.logprobs is None else request.logprobs
    prompt_logprobs = request.logprobs if request.echo else None
    request_names = {"prompt_logprobs": "logprobs", "n": "best_of" if best_of > request.n else "n"}
    return _build(request, {"n": best_of, "max_tokens": request.max_tokens, "logprobs": logprobs,
                            "prompt_logprobs": prompt_logprobs}, request_names, check_params, constraint)


def num_candidates(request: CompletionRequest) -> int:
    """Completions generated per prompt: best_of, which defaults to n."""
    return request.n if request.best_of is None else request.best_of


def chat_sampling_params(request: ChatCompletionRequest, check_params: ParamsCheck, max_sequences: int,
                         constraint: OutputConstraint | None) -> SamplingParams:
    """``logprobs: true`` turns log-probs on; ``top_logprobs: N`` adds N alternatives per token. `constraint`
    is what the output must match (from ``requested_constraint``)."""
    _check_sequence_count(1, request.n, "n", max_sequences)
    if request.top_logprobs is not None and not request.logprobs:
        raise APIError(HTTPStatus.BAD_REQUEST, "top_logprobs needs logprobs set to true", param="top_logprobs",
                       code="invalid_value")
    use_completion_tokens = request.max_completion_tokens is not None
    max_tokens = request.max_completion_tokens if use_completion_tokens else request.max_tokens
    logprobs = (request.top_logprobs or 0) if request.logprobs else None
    request_names = {"logprobs": "top_logprobs"}
    if use_completion_tokens:
        request_names["max_tokens"] = "max_completion_tokens"
    return _build(request, {"max_tokens": max_tokens, "logprobs": logprobs}, request_names, check_params, constraint)


def _check_sequence_count(num_prompts: int, per_prompt: int, per_prompt_name: str, max_sequences: int) -> None:
    """Refuse a request that would create more than `max_sequences` sequences (the
    max_sequences_per_request setting), before any of its prompts is tokenized or queued."""
    total = num_prompts * per_prompt
    if total > max_sequences:
        prompts = f"{num_prompts} prompt{'s' * (num_prompts != 1)}"
        raise APIError(HTTPStatus.BAD_REQUEST,
                       f"this request would create {total} sequences ({prompts} x {per_prompt_name}={per_prompt}) "
                       f"but the server allows at most {max_sequences} per request (max_sequences_per_request); "
                       f"send fewer prompts or a lower {per_prompt_name}",
                       param="prompt" if num_prompts > 1 else per_prompt_name, code="invalid_value")


def _build(request: GenerationRequest, specific: dict[str, Any], request_names: dict[str, str],
           check_params: ParamsCheck, constraint: OutputConstraint | None) -> SamplingParams:
    """SamplingParams from the shared fields plus `specific`, checked against the model by `check_params`
    (the engine's, ``AsyncEngine.inputs.check_params``); a bad value is a 400 naming its field."""
    fields = {name: getattr(request, name) for name in _SHARED_FIELDS if getattr(request, name) is not None}
    fields.update(specific, logit_bias=_logit_bias(request.logit_bias),
                  structured_outputs=constraint.params if constraint is not None else None)
    try:
        params = SamplingParams(**fields)
        check_params(params)
    except InvalidRequestError as error:
        # SamplingParams' messages start with the parameter's name; say the request's name instead.
        name, rest = str(error).split(" ", 1)
        param = request_names.get(name, name)
        raise APIError(HTTPStatus.BAD_REQUEST, f"{param} {rest}", param=param, code="invalid_value") from None
    return params


def _logit_bias(logit_bias: dict[str, float] | None) -> dict[int, float] | None:
    """OpenAI's JSON keys token ids as strings ("50256"); SamplingParams keys them as ints."""
    if logit_bias is None:
        return None
    for key in logit_bias:
        if not (key.isascii() and key.isdigit()):
            raise APIError(HTTPStatus.BAD_REQUEST, f"logit_bias keys must be token ids (integers >= 0 written as "
                           f"strings), got {quote_value(key)}", param="logit_bias", code="invalid_value")
    return {int(key): bias for key, bias in logit_bias.items()}
