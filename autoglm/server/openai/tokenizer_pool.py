"""The server's tokenizing and detokenizing, on worker threads that each own a copy of the tokenizer.

Tokenizing millions of characters takes seconds: on the event loop it would stall every
connection, on the engine thread every running stream. In a worker it delays only the requests
queued behind it (the fast tokenizers release the GIL while they work). Threads that share one
fast tokenizer can fail with "Already borrowed" when one changes its settings (transformers does,
inside any call whose options differ from the last one's) while another encodes, so no two workers share one.
"""
from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TypeVar

from transformers import PreTrainedTokenizerBase

from autoglm.engine.tokenize import PromptCharLimit, encode_text

Result = TypeVar("Result")


class TokenizerPool:
    """`num_workers` threads, each with its own copy of `tokenizer` (``worker_tokenizers``), made with the pool."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, num_workers: int, char_limit: PromptCharLimit) -> None:
        self.char_limit = char_limit
        self.worker_tokenizers = tuple(copy.deepcopy(tokenizer) for _ in range(num_workers))
        self._worker = threading.local()
        # The executor starts at most num_workers threads; each claims one copy as it starts.
        self._executor = ThreadPoolExecutor(num_workers, thread_name_prefix="autoglm-tokenizer",
                                            initializer=self._claim_tokenizer, initargs=(list(self.worker_tokenizers),))

    def _claim_tokenizer(self, unclaimed: list[PreTrainedTokenizerBase]) -> None:
        self._worker.tokenizer = unclaimed.pop()  # atomic: no two workers claim the same copy

    async def run(self, work: Callable[[PreTrainedTokenizerBase], Result]) -> Result:
        """`work` applied to a worker's own tokenizer, on that worker's thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._apply, work)

    def _apply(self, work: Callable[[PreTrainedTokenizerBase], Result]) -> Result:
        return work(self._worker.tokenizer)

    async def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`; a text longer than the context could hold is refused at once, untokenized."""
        self.char_limit.check(text)
        return await self.run(partial(encode_text, text=text, add_special_tokens=add_special_tokens))

    async def decode(self, token_ids: list[int]) -> str:
        return await self.run(lambda tokenizer: tokenizer.decode(token_ids))

    def shutdown(self) -> None:
        """Drop the work not started yet; work already running finishes on its own."""
        self._executor.shutdown(wait=False, cancel_futures=True)
