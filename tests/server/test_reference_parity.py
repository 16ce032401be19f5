"""The server against an outside reference: transformers' greedy generate and its own chat template.

Other server tests compare the server with itself; these catch a prompt built wrongly (a doubled
BOS, a template applied differently) because the reference tokenizes on its own. The tokenizer
adds BOS to every text and the chat template writes one too, so a chat prompt encoded with
special tokens on would start with two.
"""
from __future__ import annotations

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from tests.engine.reference import Reference, greedy_reference
from tests.server.live_server import RunningServer, start_server
from tests.tiny_models import BOS_ID, make_tiny_checkpoint

MODEL = "tiny-llama-bos"
PROMPT = "The quick brown fox"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "To be, or not to be"}]
NUM_NEW_TOKENS = 16
LOGPROB_TOLERANCE = 1e-4

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def bos_model(tmp_path_factory):
    return make_tiny_checkpoint("llama", tmp_path_factory.mktemp("tiny-llama-bos"), add_bos_token=True)


@pytest.fixture(scope="module")
def tokenizer(bos_model) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(bos_model)


@pytest.fixture(scope="module")
def reference_prompts(tokenizer) -> dict[str, list[int]]:
    """Each endpoint's prompt as transformers tokenizes it, each with exactly one leading BOS."""
    prompts = {
        "completion": tokenizer(PROMPT)["input_ids"],
        "chat": tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True)["input_ids"],
    }
    for token_ids in prompts.values():
        assert token_ids[0] == BOS_ID and token_ids.count(BOS_ID) == 1
    return prompts


@pytest.fixture(scope="module")
def reference(bos_model, reference_prompts) -> dict[str, Reference]:
    names = list(reference_prompts)
    both = greedy_reference(bos_model, [reference_prompts[name] for name in names], NUM_NEW_TOKENS)
    return {name: Reference([both.token_ids[i]], [both.logprobs[i]]) for i, name in enumerate(names)}


@pytest.fixture(scope="module")
def bos_server(bos_model) -> RunningServer:
    running = start_server(bos_model, served_model_name=MODEL, dtype="float32")
    yield running
    running.stop()


def assert_matches_reference(tokenizer: PreTrainedTokenizerBase, expected: Reference, text: str,
                             tokens: list[str], logprobs: list[float]) -> None:
    """The reply's tokens (as the server spells each one), their log-probs and its text."""
    token_ids = expected.token_ids[0]
    assert tokens == [tokenizer.decode([token_id]) for token_id in token_ids]
    assert logprobs == pytest.approx(expected.logprobs[0], abs=LOGPROB_TOLERANCE)
    assert text == tokenizer.decode(token_ids)


def test_completion_matches_transformers_greedy(bos_server, tokenizer, reference_prompts, reference):
    result = bos_server.openai().completions.create(model=MODEL, prompt=PROMPT, max_tokens=NUM_NEW_TOKENS,
                                                    temperature=0, logprobs=0, extra_body={"ignore_eos": True})
    assert result.usage.prompt_tokens == len(reference_prompts["completion"])
    assert result.usage.completion_tokens == NUM_NEW_TOKENS
    choice = result.choices[0]
    assert_matches_reference(tokenizer, reference["completion"], choice.text, choice.logprobs.tokens,
                             choice.logprobs.token_logprobs)


def test_chat_prompt_is_the_chat_template_with_one_bos(bos_server, tokenizer, reference_prompts, reference):
    result = bos_server.openai().chat.completions.create(model=MODEL, messages=MESSAGES,
                                                         max_tokens=NUM_NEW_TOKENS, temperature=0, logprobs=True,
                                                         extra_body={"ignore_eos": True})
    assert result.usage.prompt_tokens == len(reference_prompts["chat"])
    assert result.usage.completion_tokens == NUM_NEW_TOKENS
    choice = result.choices[0]
    content = choice.logprobs.content
    assert_matches_reference(tokenizer, reference["chat"], choice.message.content,
                             [entry.token for entry in content], [entry.logprob for entry in content])
