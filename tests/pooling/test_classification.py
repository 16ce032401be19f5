"""Classify and score with tiny random sequence classifiers and a yes/no reranker: equal to transformers' logits."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

from autoglm import LLM
from autoglm.engine.pooling.pair_prompts import pair_prompt
from tests.pooling.checkpoints import make_classifier_checkpoint
from tests.tiny_models import make_tiny_checkpoint

QUERY = "What does the fox jump over?"
DOCUMENTS = ["The quick brown fox jumps over the lazy dog.", "Hello world!", "To be, or not to be"]
ATOL = 1e-4


def engine(model_dir, max_context_len: int = 128, **settings) -> LLM:
    return LLM(str(model_dir), dtype="float32", max_context_len=max_context_len, kv_cache_memory="2MiB", **settings)


def classifier(model_dir):
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).eval()

    def logits(token_ids: list[int]) -> torch.Tensor:
        with torch.no_grad():
            return model(torch.tensor([token_ids])).logits[0]
    return logits


def test_score_of_a_sequence_classifier_equals_transformers(tmp_path):
    model_dir = make_classifier_checkpoint("qwen2", tmp_path)
    llm = engine(model_dir, max_num_batched_tokens=8)  # runner 'auto' pools a *ForSequenceClassification
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    classifier_logits = classifier(model_dir)
    scores = llm.score(QUERY, DOCUMENTS, use_tqdm=False)
    classified = llm.classify(DOCUMENTS, use_tqdm=False)
    for document, score, output in zip(DOCUMENTS, scores, classified, strict=True):
        pair = tokenizer(QUERY, document)["input_ids"]
        assert score.prompt_token_ids == pair
        expected = classifier_logits(pair)
        assert abs(score.score - torch.sigmoid(expected).item()) < ATOL
        logits = classifier_logits(tokenizer.encode(document))
        assert torch.allclose(torch.tensor(output.logits), logits, atol=ATOL)
    assert llm.engine.block_manager.num_referenced_blocks() == 0


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_classify_with_three_labels(tmp_path, arch):
    model_dir = make_classifier_checkpoint(arch, tmp_path, num_labels=3)
    llm = engine(model_dir)
    output = llm.classify(DOCUMENTS[0], use_tqdm=False)[0]
    expected = classifier(model_dir)(output.prompt_token_ids)
    assert torch.allclose(torch.tensor(output.logits), expected, atol=ATOL)
    assert torch.allclose(torch.tensor(output.probs), torch.softmax(expected, dim=0), atol=ATOL)


def test_yes_no_reranker_scores_the_logit_difference_of_its_last_token(tmp_path):
    model_dir = make_tiny_checkpoint("qwen3", tmp_path)
    llm = engine(model_dir, max_context_len=512, classifier_from_token=["n", "y"],
                 max_num_batched_tokens=128)
    tokenizer = llm.get_tokenizer()
    no_id, yes_id = tokenizer.convert_tokens_to_ids(["n", "y"])
    reference = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    scores = llm.score(QUERY, DOCUMENTS, use_tqdm=False)
    for document, score in zip(DOCUMENTS, scores, strict=True):
        prompt = pair_prompt(tokenizer, llm.engine.pooling_model, QUERY, document)
        assert score.prompt_token_ids == prompt and "<Document>: " + document in tokenizer.decode(prompt)
        with torch.no_grad():
            logits = reference(torch.tensor([prompt])).logits[0, -1]
        assert abs(score.score - torch.sigmoid(logits[yes_id] - logits[no_id]).item()) < ATOL
