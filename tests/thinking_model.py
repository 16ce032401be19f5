"""A tiny checkpoint in the format of a GLM-4.5 chat model, whose weights make it open its thinking.

Its tokenizer knows GLM-4.5's markers: the turn markers as special tokens, the thinking and tool-call
tags as plain added tokens that survive decoding, as in the real tokenizers; its chat template is
GLM45_TEMPLATE. Two hidden dimensions are set aside so that the thinking tests have a model that
behaves like a thinking one without training:

- FLAG_DIM is zero in every embedding but ``<|assistant|>``'s, which is large there, and no layer writes
  to it (the post-norms' weights are zero there), so the last position of a generation prompt has a final
  hidden state dominated by it; ``<think>``'s lm_head row reads it, so greedy decoding opens the thinking.
- BIAS_DIM holds the same constant in every embedding, also untouched by the layers; the lm_head rows of
  ``<think>``, the end of thinking, every other marker and the special tokens read it negatively, so
  those tokens are unlikely anywhere else: thinking goes on until a budget ends it, and EOS is rare.
"""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import AddedToken

from tests.server.tool_calls.templates import GLM45_TEMPLATE
from tests.tiny_models import BOS_ID, EOS_ID, PAD_ID, build_tiny_model, build_tiny_tokenizer

SPECIAL_MARKERS = ("[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>")
PLAIN_MARKERS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
                 "<arg_value>", "</arg_value>")
THINK_START, THINK_END, ASSISTANT = "<think>", "</think>", "<|assistant|>"

FLAG_DIM, BIAS_DIM = -1, -2
FLAG_VALUE = 100.0  # <|assistant|>'s embedding there: far above the rest of the residual stream
BIAS_VALUE = 4.0  # every embedding's there
THINK_GAIN = 10.0  # <think>'s lm_head weight on FLAG_DIM
SUPPRESSION = 5.0  # minus the lm_head weight on BIAS_DIM of the markers and special tokens


def make_glm45_chat_model(folder: Path) -> Path:
    """Save the tiny GLM-4.5-format chat model to ``folder``; returns the folder."""
    extra_tokens = ([AddedToken(marker, special=True, normalized=False) for marker in SPECIAL_MARKERS]
                    + [AddedToken(marker, special=False, normalized=False) for marker in PLAIN_MARKERS])
    model = build_tiny_model("glm4")
    tokenizer = build_tiny_tokenizer(model.config.vocab_size, extra_tokens=extra_tokens)
    tokenizer.chat_template = GLM45_TEMPLATE
    ids = tokenizer.convert_tokens_to_ids
    suppressed = [PAD_ID, BOS_ID, EOS_ID] + [ids(marker) for marker in (*SPECIAL_MARKERS, *PLAIN_MARKERS)]
    state = model.state_dict()
    with torch.no_grad():
        embeddings, lm_head = state["model.embed_tokens.weight"], state["lm_head.weight"]
        embeddings[:, FLAG_DIM] = 0.0
        embeddings[ids(ASSISTANT), FLAG_DIM] = FLAG_VALUE
        embeddings[:, BIAS_DIM] = BIAS_VALUE
        for name, weight in state.items():
            if name.endswith(("post_self_attn_layernorm.weight", "post_mlp_layernorm.weight")):
                weight[[FLAG_DIM, BIAS_DIM]] = 0.0  # no layer writes to the two dimensions
        state["model.norm.weight"][[FLAG_DIM, BIAS_DIM]] = 1.0
        lm_head[suppressed] = 0.0
        lm_head[suppressed, BIAS_DIM] = -SUPPRESSION
        lm_head[ids(THINK_START), FLAG_DIM] = THINK_GAIN
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
