"""POST /v1/completions: a prompt, or a batch of them, in; text out, in OpenAI's legacy completions shapes."""
from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Request, Response
from transformers import PreTrainedTokenizerBase

from autoglm.engine.tokenize import Prompt, TokenizedPrompt
from autoglm.outputs import CompletionOutput, PositionLogprobs, RequestOutput
from autoglm.server.dependencies import State
from autoglm.server.openai.logprobs import completion_logprobs, token_decoder
from autoglm.server.openai.output_constraints import compile_grammar, requested_constraint
from autoglm.server.openai.protocol import CompletionRequest
from autoglm.server.openai.responses import CompletionChoice, CompletionLogprobs, CompletionResponse, UsageInfo
from autoglm.server.openai.sampling import completion_sampling_params
from autoglm.server.openai.generation import accept_generation, choice_index, response_cache_lookup, serve_generation
from autoglm.server.state import ServerState
from autoglm.server.tenants.max_tokens_cap import capped_max_tokens
from autoglm.server.tenants.request_budget import admit_generation
from autoglm.server.openai.streaming import ChoiceDelta, ChunkStream
from autoglm.server.openai.tokenizer_pool import TokenizerPool
from autoglm.server.openai.unsupported import refuse_unimplemented


router = APIRouter()


@router.post("/v1/completions")
async def completions(body: CompletionRequest, raw: Request, state: ServerState = State) -> Response:
    accept_generation(raw, state, body)
    return await create_completion(raw, state, body)


async def create_completion(raw: Request, state: ServerState, body: CompletionRequest) -> Response:
    tracker = state.new_tracker("cmpl", raw, body.prompt)
    with tracker.logging_rejection():
        served = state.serve(body.model, tracker, body.user)
        engine = served.engine
        refuse_unimplemented(body)
        body = capped_max_tokens(raw, body)
        constraint = requested_constraint(body)
        params = completion_sampling_params(body, engine.inputs.check_params,
                                            state.config.http.max_sequences_per_request, constraint)
        await compile_grammar(engine, constraint)
        prompts = await tokenize_prompts(served.tokenizers, body.prompts)
        tracker.on_tokens = await admit_generation(raw, body, params, [len(prompt.token_ids) for prompt in prompts],
                                                   engine.max_context_len)
    builder = CompletionBuilder(tracker.request_id, int(tracker.arrival_time), served.version_id, body.echo,
                                body.logprobs, body.n, engine.tokenizer)
    return await serve_generation(raw, served, tracker, prompts, params, body, builder,
                                  response_cache_lookup(state, raw, body, params, served))


async def tokenize_prompts(tokenizers: TokenizerPool, prompts: list[Prompt]) -> list[TokenizedPrompt]:
    """Each prompt as token ids, the text ones tokenized on the tokenizer workers."""
    return [TokenizedPrompt(await tokenizers.encode(prompt), prompt) if isinstance(prompt, str)
            else TokenizedPrompt(prompt) for prompt in prompts]


@dataclass
class CompletionBuilder(ChunkStream):
    """With ``echo`` each choice's text (and log-probs) starts with its own prompt's.

    With ``best_of`` each prompt's candidates outnumber ``n``: its choices are the n with the highest
    cumulative log-prob, best first.
    """

    request_id: str
    created: int
    model: str
    echo: bool
    num_logprobs: int | None
    n: int
    tokenizer: PreTrainedTokenizerBase

    def response(self, outputs: list[RequestOutput], usage: UsageInfo) -> CompletionResponse:
        choices = []
        for prompt_index, output in enumerate(outputs):
            prefix = self._echoed_prompt(output)
            for rank, completion in enumerate(self._best(output.outputs)):
                choices.append(CompletionChoice(
                    index=choice_index(prompt_index, self.n, rank),
                    text=prefix + completion.text,
                    logprobs=self._logprobs(output.prompt_token_ids, output.prompt_logprobs, completion.token_ids,
                                            completion.logprobs, self.echo, 0),
                    finish_reason=completion.finish_reason,
                ))
        return self._wrap(choices, usage)

    def chunk(self, delta: ChoiceDelta, output: RequestOutput) -> CompletionResponse:
        # The echoed prompt goes out with each choice's first chunk.
        with_prompt = self.echo and delta.is_first
        prefix = self._echoed_prompt(output)
        text = prefix + delta.text if with_prompt else delta.text
        first_offset = 0 if with_prompt else len(prefix) + delta.text_offset
        logprobs = self._logprobs(output.prompt_token_ids, delta.prompt_logprobs, delta.token_ids, delta.logprobs,
                                  with_prompt, first_offset)
        choice = CompletionChoice(index=delta.index, text=text, logprobs=logprobs, finish_reason=delta.finish_reason)
        return self._wrap([choice], None)

    def usage_chunk(self, usage: UsageInfo) -> CompletionResponse:
        return self._wrap([], usage)

    def _wrap(self, choices: list[CompletionChoice], usage: UsageInfo | None) -> CompletionResponse:
        return CompletionResponse(id=self.request_id, created=self.created, model=self.model, choices=choices,
                                  usage=usage)

    def _best(self, candidates: list[CompletionOutput]) -> list[CompletionOutput]:
        """The n choices to return: every completion, or the likeliest n of best_of candidates."""
        if len(candidates) == self.n:
            return candidates
        # best_of > n: the sampling params asked the engine for log-probs, so every candidate has a sum.
        return sorted(candidates, key=lambda completion: completion.cumulative_logprob, reverse=True)[:self.n]

    def _echoed_prompt(self, output: RequestOutput) -> str:
        if not self.echo:
            return ""
        if output.prompt is not None:
            return output.prompt
        return self.tokenizer.decode(output.prompt_token_ids)

    def _logprobs(self, prompt_token_ids: list[int], prompt_positions: list[PositionLogprobs | None] | None,
                  token_ids: list[int], positions: list[PositionLogprobs] | None, with_prompt: bool,
                  first_offset: int) -> CompletionLogprobs | None:
        if self.num_logprobs is None or positions is None:
            return None
        all_ids: list[int] = list(token_ids)
        all_positions: list[PositionLogprobs | None] = list(positions)
        if with_prompt:
            all_ids = prompt_token_ids + all_ids
            all_positions = list(prompt_positions or []) + all_positions
        decode = token_decoder(self.tokenizer)
        return completion_logprobs(all_ids, all_positions, self.num_logprobs, decode, first_offset)
