"""What a request hands out after a step, in the kind it asked for (see RequestOutputKind).

The engine records each token once, its log-probs in the shape the caller reads (built by
:func:`~autoglm.engine.step_result.position_logprobs`); the kinds differ only in how much of that
record an output carries.
"""
from __future__ import annotations

from autoglm.engine.request_state import CompletionState, RequestState
from autoglm.outputs import CompletionOutput, PositionLogprobs, RequestOutput
from autoglm.sampling_params import RequestOutputKind


def take_output(state: RequestState) -> RequestOutput | None:
    """What the request hands out now, or None: nothing new (no completion gained a token, and the
    prompt's log-probs were already sent or are not all scored), or FINAL_ONLY before the end.

    DELTA carries the completions that advanced, only their new part, and the prompt's log-probs once;
    CUMULATIVE every completion that has begun, whole, and the prompt's log-probs in every output;
    FINAL_ONLY everything, once.
    """
    kind = state.params.output_kind
    if kind is RequestOutputKind.FINAL_ONLY and not state.finished:
        return None
    advanced = [completion for completion in state.completions if completion.has_unsent_tokens]
    prompt_logprobs_new = state.prompt_logprobs_ready and not state.prompt_logprobs_sent
    if not advanced and not prompt_logprobs_new:
        return None
    if kind is RequestOutputKind.CUMULATIVE:
        completions = [_whole(completion) for completion in state.completions if completion.seq.num_output_tokens]
        prompt_logprobs = state.prompt_logprobs if state.prompt_logprobs_ready else None
    else:
        completions = [_new_part(completion) for completion in advanced]
        prompt_logprobs = state.prompt_logprobs if prompt_logprobs_new else None
    for completion in advanced:
        completion.mark_sent()
    state.prompt_logprobs_sent = state.prompt_logprobs_ready
    return RequestOutput(
        request_id=state.request_id,
        prompt=state.prompt,
        prompt_token_ids=state.prompt_token_ids,
        outputs=completions,
        finished=state.finished,
        metrics=state.metrics,
        prompt_logprobs=prompt_logprobs,
        num_cached_tokens=state.num_cached_tokens,
    )


def _new_part(completion: CompletionState) -> CompletionOutput:
    """What the completion produced since it was last handed out; only the new tokens are copied."""
    sent = completion.num_tokens_sent
    return _output(completion, "".join(completion.text_pieces[completion.num_text_pieces_sent:]),
                   completion.seq.token_ids[completion.seq.num_prompt_tokens + sent:],
                   None if completion.logprobs is None else completion.logprobs[sent:])


def _whole(completion: CompletionState) -> CompletionOutput:
    """Everything the completion produced so far, copied: later steps do not change an output handed out."""
    return _output(completion, "".join(completion.text_pieces),
                   completion.seq.token_ids[completion.seq.num_prompt_tokens:],
                   None if completion.logprobs is None else list(completion.logprobs))


def _output(completion: CompletionState, text: str, token_ids: list[int],
            logprobs: list[PositionLogprobs] | None) -> CompletionOutput:
    return CompletionOutput(
        index=completion.seq.index,
        text=text,
        token_ids=token_ids,
        cumulative_logprob=completion.cumulative_logprob if logprobs is not None else None,
        logprobs=logprobs,
        finish_reason=completion.finish_reason,
        stop_reason=completion.stop_reason,
    )
