"""The shared tiny checkpoints load in transformers with a tokenizer that fits the model."""
from __future__ import annotations

import pytest
from transformers import AutoConfig, AutoTokenizer

from tests.tiny_models import EOS_ID, TINY_ARCHITECTURES, make_tiny_checkpoint, tiny_config


@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
def test_tokenizer_matches_the_model(arch: str, tmp_path) -> None:
    model_dir = make_tiny_checkpoint(arch, tmp_path, vocab_size=400)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = AutoConfig.from_pretrained(model_dir)
    assert len(tokenizer) == config.vocab_size == 400
    assert tokenizer.eos_token_id == config.eos_token_id == EOS_ID
    text = "To be, or not to be: that is the question."
    ids = tokenizer(text)["input_ids"]
    assert len(ids) < len(text) and max(ids) < config.vocab_size
    assert tokenizer.decode(ids) == text
    assert "assistant:" in tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )


def test_unknown_family_lists_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match="unknown tiny architecture 'mistral'; choose one of: llama, qwen2, qwen3, glm4"
    ):
        tiny_config("mistral")
