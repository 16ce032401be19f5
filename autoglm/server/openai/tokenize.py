"""/tokenize, /detokenize and /tokenizer_info (vLLM's): the server's tokenizer, for clients that count or render
prompts as the server does."""
from __future__ import annotations

from fastapi import APIRouter, Request

from autoglm.server.dependencies import State, allowed_model, get_and_head
from autoglm.server.media.conversation import chat_prompt
from autoglm.server.openai.chat_template_choice import request_rendering
from autoglm.server.openai.protocol import DetokenizeRequest, DetokenizeResponse, TokenizeRequest, TokenizeResponse
from autoglm.server.openai.responses import TokenizerInfo
from autoglm.server.openai.tokenizer_info import tokenizer_info_of
from autoglm.server.state import ServerState

router = APIRouter()


@get_and_head(router, "/tokenizer_info")
async def tokenizer_info(raw: Request, model: str | None = None, state: ServerState = State) -> TokenizerInfo:
    """vLLM's: the tokenizer's special tokens and chat template, for clients that tokenize and render prompts
    themselves through /tokenize (lm-evaluation-harness asks it when given no tokenizer of its own)."""
    model = allowed_model(raw, state, model, generates=False)
    engine = state.route(model).engine
    return tokenizer_info_of(engine.tokenizer, engine.max_context_len)


@router.post("/tokenize")
async def tokenize(body: TokenizeRequest, raw: Request, state: ServerState = State) -> TokenizeResponse:
    """Token ids on a tokenizer worker (a vision model's images read, each placeholder expanded as the engine
    gets it); a text longer than the context could hold is refused untokenized."""
    body.model = allowed_model(raw, state, body.model, generates=False)
    served = state.route(body.model)
    if body.messages is not None:
        rendering = request_rendering(body, state.config.chat, served.engine.tokenizer.chat_template)
        tokens = (await chat_prompt(served.tokenizers, served.images, body.messages, rendering,
                                    mm_processor_kwargs=body.mm_processor_kwargs)).prompt.token_ids
    else:
        tokens = await served.tokenizers.encode(body.prompt, add_special_tokens=body.add_special_tokens)
    return TokenizeResponse(count=len(tokens), max_model_len=served.engine.max_context_len, tokens=tokens)


@router.post("/detokenize")
async def detokenize(body: DetokenizeRequest, raw: Request, state: ServerState = State) -> DetokenizeResponse:
    body.model = allowed_model(raw, state, body.model, generates=False)
    served = state.route(body.model)
    served.engine.inputs.check_token_ids(body.tokens, "tokens")
    return DetokenizeResponse(prompt=await served.tokenizers.decode(body.tokens))
