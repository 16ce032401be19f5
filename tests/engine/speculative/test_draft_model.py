"""A draft must share the target's vocabulary; the error says which sizes differ."""
import pytest

from autoglm import LLM
from tests.tiny_models import make_tiny_checkpoint


def test_a_draft_of_another_vocabulary_is_refused(tmp_path):
    target = make_tiny_checkpoint("llama", tmp_path / "target")
    other = make_tiny_checkpoint("qwen2", tmp_path / "other", vocab_size=384)
    spec = {"method": "draft_model", "num_speculative_tokens": 2, "model": str(other)}
    with pytest.raises(ValueError, match="has a vocabulary of 384 tokens but the target's has 320; a draft must "
                                         "share the target's tokenizer"):
        LLM(model=str(target), dtype="float32", speculative_config=spec)
