"""OpenAI request fields to SamplingParams, with range errors named as the request names them."""
from __future__ import annotations

from http import HTTPStatus
from typing import Any

from autoglm.sampling_params import SamplingParams
from autoglm.server.errors import APIError
from autoglm.server.protocol import ChatCompletionRequest, CompletionRequest, GenerationRequest

# Request fields that carry over to SamplingParams under the same name when given.
_SHARED_FIELDS = (
    "n", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
    "repetition_penalty", "seed", "stop", "ignore_eos", "min_tokens", "stop_token_ids",
)


def completion_sampling_params(request: CompletionRequest) -> SamplingParams:
    """``logprobs: N`` asks for N alternatives per token; with ``echo`` the prompt's too."""
    prompt_logprobs = request.logprobs if request.echo else None
    return _build(request, {"max_tokens": request.max_tokens, "logprobs": request.logprobs,
                            "prompt_logprobs": prompt_logprobs},
                  request_names={"prompt_logprobs": "logprobs"})


def chat_sampling_params(request: ChatCompletionRequest) -> SamplingParams:
    """``logprobs: true`` turns log-probs on; ``top_logprobs: N`` adds N alternatives per token."""
    if request.top_logprobs is not None and not request.logprobs:
        raise APIError(HTTPStatus.BAD_REQUEST, "top_logprobs needs logprobs set to true", param="top_logprobs")
    use_completion_tokens = request.max_completion_tokens is not None
    max_tokens = request.max_completion_tokens if use_completion_tokens else request.max_tokens
    logprobs = (request.top_logprobs or 0) if request.logprobs else None
    request_names = {"logprobs": "top_logprobs"}
    if use_completion_tokens:
        request_names["max_tokens"] = "max_completion_tokens"
    return _build(request, {"max_tokens": max_tokens, "logprobs": logprobs}, request_names)


def _build(request: GenerationRequest, specific: dict[str, Any], request_names: dict[str, str]) -> SamplingParams:
    """SamplingParams from the shared fields plus `specific`; a bad value is a 400 naming its field."""
    fields = {name: getattr(request, name) for name in _SHARED_FIELDS if getattr(request, name) is not None}
    try:
        return SamplingParams(**fields, **specific)
    except ValueError as error:
        # SamplingParams' messages start with the parameter's name; say the request's name instead.
        name, rest = str(error).split(" ", 1)
        param = request_names.get(name, name)
        raise APIError(HTTPStatus.BAD_REQUEST, f"{param} {rest}", param=param) from None
