"""The embedded default model: loads both ways, scores held-out text like transformers, reads as a play."""
from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from autoglm import LLM, SamplingParams
from autoglm.cli.main import main
from autoglm.model_paths import DEFAULT_MODEL_DIR
from autoglm.perplexity import evaluate_perplexity

pytestmark = pytest.mark.cpu_isa

# A passage from the held-out last tenth of the corpus (The Taming of the Shrew), kept here so
# the test does not depend on the corpus file being present.
HELD_OUT = """BIANCA:
Why, I am past my gamut long ago.

HORTENSIO:
Yet read the gamut of Hortensio.

Servant:
Mistress, your father prays you leave your books
And help to dress your sister's chamber up:
You know to-morrow is the wedding-day.

BIANCA:
Farewell, sweet masters both; I must be gone.

LUCENTIO:
Faith, mistress, then I have no cause to stay.

HORTENSIO:
But I have cause to pry into this pedant:
Methinks he looks as though he were in love:
"""


@pytest.fixture(scope="module")
def llm():
    return LLM(dtype="float32")


def test_default_model_is_small_and_complete():
    names = {path.name for path in DEFAULT_MODEL_DIR.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "generation_config.json", "README.md"} <= names
    assert sum(path.stat().st_size for path in DEFAULT_MODEL_DIR.iterdir()) < 30 * 2**20


def test_engine_scores_held_out_text_like_transformers(llm):
    result = evaluate_perplexity(llm, HELD_OUT)
    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_MODEL_DIR)
    model = AutoModelForCausalLM.from_pretrained(DEFAULT_MODEL_DIR, dtype=torch.float32)
    ids = torch.tensor([tokenizer.encode(HELD_OUT)])
    with torch.inference_mode():
        reference = model(ids, labels=ids).loss.item()
    assert math.isclose(result.loss_per_token, reference, rel_tol=1e-3)
    assert result.loss_per_character < 2.0


def test_greedy_sample_reads_as_dialogue(llm):
    out = llm.generate("ROMEO:\n", SamplingParams(temperature=0, max_tokens=80), use_tqdm=False)[0]
    text = out.outputs[0].text
    words = text.split()
    assert len(words) > 20
    assert sum(word.isalpha() for word in words) / len(words) > 0.6  # words, not noise


def test_chat_template_is_a_play(llm):
    tokenizer = llm.get_tokenizer()
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Where is my lord?"}], tokenize=False,
                                           add_generation_prompt=True)
    assert "Where is my lord?" in prompt and prompt.rstrip().endswith(":")


def test_generate_command_announces_the_default_model(caplog):
    assert main(["generate", "ROMEO:", "--max-tokens", "8"]) == 0
    assert caplog.messages[0].startswith("model: the embedded default glm4-tiny-shakespeare")
