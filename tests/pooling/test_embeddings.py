"""Embeddings of a tiny random Qwen3 model equal transformers' final normed hidden states, pooled the same way,
alone, in a batch of 64 and read in small chunks; no KV block is left held after."""
from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoModel

from autoglm import LLM
from autoglm.pooling_params import PoolingParams
from tests.pooling.checkpoints import make_embedding_checkpoint

MIN_COSINE = 0.99999
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Hello world!", "To be, or not to be", "42"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_embedding_checkpoint(tmp_path_factory.mktemp("qwen3-embedding"))


@pytest.fixture(scope="module")
def reference(model_dir):
    model = AutoModel.from_pretrained(model_dir, dtype=torch.float32).eval()

    def hidden_states(token_ids: list[int]) -> torch.Tensor:
        with torch.no_grad():
            return model(torch.tensor([token_ids])).last_hidden_state[0]
    return hidden_states


def pooled(hidden: torch.Tensor, pooling_type: str) -> torch.Tensor:
    vector = {"LAST": hidden[-1], "MEAN": hidden.mean(dim=0), "CLS": hidden[0]}[pooling_type]
    return torch.nn.functional.normalize(vector, dim=0)


def random_prompts(count: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, 300) for _ in range(rng.randrange(1, 60))] for _ in range(count)]


def engine(model_dir, **settings) -> LLM:
    return LLM(str(model_dir), dtype="float32", max_context_len=128, kv_cache_memory="2MiB", **settings)


def assert_close(actual: list[float] | torch.Tensor, expected: torch.Tensor, what: str) -> None:
    cosine = torch.nn.functional.cosine_similarity(torch.as_tensor(actual), expected, dim=0)
    assert cosine > MIN_COSINE, f"{what}: cosine {cosine.item():.7f}"


def assert_no_blocks_held(llm: LLM) -> None:
    manager = llm.engine.block_manager
    manager.check_invariants()
    assert manager.num_referenced_blocks() == 0 and manager.num_free_blocks == manager.num_blocks
    assert not llm.engine.requests


def test_a_batch_of_64_equals_each_input_alone_and_transformers(model_dir, reference):
    prompts = random_prompts(64, seed=1)
    llm = engine(model_dir, pooling_type="LAST")
    batch = llm.embed(prompts, use_tqdm=False)
    for index in range(0, 64, 8):
        alone = llm.embed(prompts[index], use_tqdm=False)[0].embedding
        assert_close(alone, torch.tensor(batch[index].embedding), f"prompt {index} alone against in the batch")
    for index, output in enumerate(batch):
        assert output.prompt_token_ids == prompts[index]
        assert_close(output.embedding, pooled(reference(prompts[index]), "LAST"), f"prompt {index} in a batch of 64")
    assert abs(torch.tensor(batch[0].embedding).norm().item() - 1.0) < 1e-5
    assert_no_blocks_held(llm)


@pytest.mark.parametrize("pooling_type", ["LAST", "MEAN", "CLS"])
def test_pooling_survives_chunked_prefill(model_dir, reference, pooling_type):
    prompts = random_prompts(10, seed=2)
    chunked = engine(model_dir, pooling_type=pooling_type, max_num_batched_tokens=16, max_num_seqs=4)
    outputs = chunked.embed(prompts, use_tqdm=False)
    for index, (prompt, output) in enumerate(zip(prompts, outputs, strict=True)):
        assert_close(output.embedding, pooled(reference(prompt), pooling_type), f"prompt {index} in chunks of 16")
    assert_no_blocks_held(chunked)


def test_text_prompts_the_checkpoint_pooling_and_unnormalised_vectors(model_dir, reference):
    llm = engine(model_dir)  # runner and LAST pooling read from modules.json and 1_Pooling
    assert llm.engine.pooling_model.pooling_type == "LAST"
    outputs = llm.embed(TEXTS, use_tqdm=False)
    raw = llm.embed(TEXTS, PoolingParams(normalize=False), use_tqdm=False)
    tokenizer = llm.get_tokenizer()
    for text, output, raw_output in zip(TEXTS, outputs, raw, strict=True):
        hidden = reference(tokenizer.encode(text))
        assert_close(output.embedding, pooled(hidden, "LAST"), text)
        assert torch.allclose(torch.tensor(raw_output.embedding), hidden[-1], atol=1e-4)


def test_last_token_pooling_reads_the_prefix_cache_and_mean_pooling_does_not(model_dir, reference):
    shared = random_prompts(1, seed=3)[0] * 3  # long enough to fill whole blocks
    prompts = [shared + [5, 6], shared + [7]]
    for pooling_type, reads_cache in (("LAST", True), ("MEAN", False)):
        llm = engine(model_dir, pooling_type=pooling_type)
        first = llm.encode(prompts[0], use_tqdm=False)[0]
        second = llm.encode(prompts[1], use_tqdm=False)[0]
        assert first.num_cached_tokens == 0
        assert (second.num_cached_tokens > 0) is reads_cache, pooling_type
        assert_close(second.outputs.data, pooled(reference(prompts[1]), pooling_type), f"{pooling_type} after a hit")
        assert_no_blocks_held(llm)


def test_matryoshka_dimensions_cut_then_normalise(model_dir, reference):
    llm = engine(model_dir, matryoshka_dimensions=[16, 64])
    output = llm.embed(TEXTS[0], PoolingParams(dimensions=16), use_tqdm=False)[0]
    hidden = reference(llm.get_tokenizer().encode(TEXTS[0]))
    assert len(output.embedding) == 16
    assert_close(output.embedding, torch.nn.functional.normalize(hidden[-1, :16], dim=0), "first 16 dimensions")


def test_truncation_keeps_the_last_tokens(model_dir, reference):
    llm = engine(model_dir)
    prompt = random_prompts(1, seed=4)[0] + list(range(3, 200))
    output = llm.embed(prompt, truncate_prompt_tokens=50, use_tqdm=False)[0]
    assert output.prompt_token_ids == prompt[-50:]
    assert_close(output.embedding, pooled(reference(prompt[-50:]), "LAST"), "the last 50 tokens")

