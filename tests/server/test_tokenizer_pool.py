"""The tokenizer workers: each owns its tokenizer, and text no context could hold never reaches them."""
from __future__ import annotations

import asyncio
import threading
from functools import partial

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from autoglm.engine.errors import ContextLengthExceededError
from autoglm.engine.tokenize import PromptCharLimit
from autoglm.server.openai import tokenizer_pool
from autoglm.server.openai.tokenizer_pool import TokenizerPool
from tests.tiny_models import TOKENIZER_TEXT

pytestmark = pytest.mark.timeout(60)

NUM_WORKERS = 4


@pytest.fixture(scope="module")
def tokenizer(chat_model) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(chat_model)


@pytest.fixture
def pool(tokenizer):
    made = TokenizerPool(tokenizer, NUM_WORKERS, PromptCharLimit.of(tokenizer, max_context_len=100_000))
    yield made
    made.shutdown()


def test_every_worker_owns_a_copy_of_the_tokenizer(tokenizer, pool):
    all_busy = threading.Barrier(NUM_WORKERS, timeout=10)

    def whose(worker_tokenizer: PreTrainedTokenizerBase) -> tuple[int, int]:
        all_busy.wait()  # the jobs run at once, so each is on a worker of its own
        return threading.get_ident(), id(worker_tokenizer)

    async def scenario() -> list[tuple[int, int]]:
        return await asyncio.gather(*(pool.run(whose) for _ in range(NUM_WORKERS)))

    owners = asyncio.run(scenario())
    assert len({thread for thread, _ in owners}) == NUM_WORKERS
    assert {copy for _, copy in owners} == {id(copy) for copy in pool.worker_tokenizers}
    assert id(tokenizer) not in {copy for _, copy in owners}


def test_concurrent_encodes_that_change_the_tokenizers_settings_never_fail(tokenizer, pool):
    """transformers writes a setting of the Rust tokenizer whenever a call asks for the other value of
    split_special_tokens; on a tokenizer another thread is encoding with, that write fails
    ("Already borrowed")."""
    text = TOKENIZER_TEXT * 100
    expected = {split: tokenizer.encode(text, split_special_tokens=split) for split in (False, True)}

    async def scenario() -> list[list[int]]:
        return await asyncio.gather(*(
            pool.run(partial(encode_splitting, text=text, split=index % 2 == 1)) for index in range(8 * NUM_WORKERS)
        ))

    for index, token_ids in enumerate(asyncio.run(scenario())):
        assert token_ids == expected[index % 2 == 1]


def encode_splitting(tokenizer: PreTrainedTokenizerBase, text: str, split: bool) -> list[int]:
    return tokenizer.encode(text, split_special_tokens=split)


def test_text_longer_than_the_context_could_hold_never_reaches_a_worker(tokenizer, monkeypatch):
    limit = PromptCharLimit(max_context_len=4, chars_per_token=5)
    small = TokenizerPool(tokenizer, 1, limit)
    encoded: list[str] = []
    monkeypatch.setattr(tokenizer_pool, "encode_text", lambda _, text, **__: encoded.append(text) or [1])
    try:
        with pytest.raises(ContextLengthExceededError) as refused:
            asyncio.run(small.encode("x" * 21))
        assert asyncio.run(small.encode("x" * 20)) == [1]
    finally:
        small.shutdown()
    assert encoded == ["x" * 20]
    message = str(refused.value)
    assert "21 characters" in message and "4 tokens" in message and "at most 20 characters" in message


def test_decode_gives_the_tokenizers_text(tokenizer, pool):
    token_ids = tokenizer.encode(TOKENIZER_TEXT)
    assert asyncio.run(pool.decode(token_ids)) == tokenizer.decode(token_ids)
