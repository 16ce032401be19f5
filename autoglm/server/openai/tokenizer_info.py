"""/tokenizer_info's answer: what a client needs to tokenize and render prompts as the server does."""
from __future__ import annotations

from transformers import PreTrainedTokenizerBase

from autoglm.server.openai.responses import TokenizerInfo


def tokenizer_info_of(tokenizer: PreTrainedTokenizerBase, max_context_len: int) -> TokenizerInfo:
    """The special tokens as text and the chat template (where it is one text, not a set of named ones)."""
    template = tokenizer.chat_template
    return TokenizerInfo(tokenizer_class=type(tokenizer).__name__, model_max_length=max_context_len,
                         bos_token=tokenizer.bos_token, eos_token=tokenizer.eos_token, pad_token=tokenizer.pad_token,
                         unk_token=tokenizer.unk_token, chat_template=template if isinstance(template, str) else None)
