"""Every pooling request an engine cannot serve is refused before it is queued, naming what is wrong."""
from __future__ import annotations

import pytest

from autoglm import LLM, SamplingParams
from autoglm.engine.errors import ContextLengthExceededError
from autoglm.errors import InvalidRequestError
from autoglm.pooling_params import PoolingParams
from tests.pooling.checkpoints import make_classifier_checkpoint, make_embedding_checkpoint
from tests.tiny_models import make_tiny_checkpoint


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    folder = make_embedding_checkpoint(tmp_path_factory.mktemp("embedding"))
    return LLM(str(folder), dtype="float32", max_context_len=64, kv_cache_memory="1MiB")


def assert_refused(error_type, call, *phrases: str) -> None:
    with pytest.raises(error_type) as refused:
        call()
    for phrase in phrases:
        assert phrase in str(refused.value), str(refused.value)


def test_pooling_on_a_generation_model_names_the_models_that_pool(tmp_path):
    llm = LLM(str(make_tiny_checkpoint("qwen3", tmp_path)), dtype="float32", max_context_len=64,
              kv_cache_memory="1MiB")
    assert llm.engine.pooling_model is None
    assert_refused(InvalidRequestError, lambda: llm.embed("hello", use_tqdm=False), "does not pool",
                   "*ForSequenceClassification")
    assert_refused(InvalidRequestError, lambda: llm.score("a", "b", use_tqdm=False), "does not pool")


def test_generation_and_wrong_tasks_on_a_pooling_model(embedder):
    assert_refused(InvalidRequestError, lambda: embedder.generate("hello", SamplingParams(), use_tqdm=False),
                   "embedding model", "does not generate")
    assert_refused(InvalidRequestError, lambda: embedder.classify("hello", use_tqdm=False), "'classify'", "embed")
    assert not embedder.engine.requests


def test_bad_prompts_and_params(embedder):
    assert_refused(ContextLengthExceededError, lambda: embedder.embed(list(range(3, 80)), use_tqdm=False),
                   "77 tokens", "64", "truncate_prompt_tokens")
    assert_refused(InvalidRequestError, lambda: embedder.embed("", use_tqdm=False), "empty")
    assert_refused(InvalidRequestError, lambda: embedder.embed([5, 100000], use_tqdm=False), "out of range")
    assert_refused(InvalidRequestError, lambda: embedder.embed("a", PoolingParams(dimensions=8), use_tqdm=False),
                   "dimensions", "Matryoshka")
    assert_refused(InvalidRequestError, lambda: embedder.embed("a", truncate_prompt_tokens=65, use_tqdm=False),
                   "truncate_prompt_tokens", "64")
    assert_refused(InvalidRequestError, lambda: PoolingParams(task="rank"), "embed, classify, score")
    assert_refused(InvalidRequestError, lambda: PoolingParams(truncate_prompt_tokens=0), "-1")
    assert_refused(InvalidRequestError, lambda: embedder.score(["a", "b"], ["c", "d", "e"], use_tqdm=False),
                   "text_1 has 2", "text_2 3")
    assert not embedder.engine.requests
    assert embedder.engine.block_manager.num_referenced_blocks() == 0


def test_settings_that_cannot_hold(tmp_path):
    classifier = make_classifier_checkpoint("qwen2", tmp_path / "classifier")
    assert_refused(ValueError, lambda: LLM(str(classifier), runner="generate", max_context_len=64,
                                           kv_cache_memory="1MiB"), "cannot generate", "'pooling'")
    assert_refused(ValueError, lambda: LLM(str(classifier), classifier_from_token=["n", "y"], max_context_len=64,
                                           kv_cache_memory="1MiB"), "classifier head")
    causal = make_tiny_checkpoint("qwen3", tmp_path / "causal")
    assert_refused(ValueError, lambda: LLM(str(causal), classifier_from_token=["no", "yes"], max_context_len=64,
                                           kv_cache_memory="1MiB"), "'no'", "one token each")
    assert_refused(ValueError, lambda: LLM(str(classifier), max_context_len=64, kv_cache_memory="1MiB",
                                           speculative_config={"method": "ngram", "num_speculative_tokens": 2}),
                   "speculative_config", "pooling engine")
    llm = LLM(str(classifier), max_context_len=64, kv_cache_memory="1MiB")
    assert_refused(InvalidRequestError, lambda: llm.embed("a", use_tqdm=False), "sequence classifier", "classify")
