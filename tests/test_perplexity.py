"""The engine's perplexity matches transformers' on the same text."""
import math
import re

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from autoglm import LLM
from autoglm.cli.main import main
from autoglm.perplexity import evaluate_perplexity, score_windows
from tests.tiny_models import make_tiny_checkpoint

TEXT = "To be, or not to be: that is the question. The quick brown fox jumps over the lazy dog. " * 3


def test_windows_score_every_position_once():
    for length, window in [(10, 4), (100, 7), (5, 16), (33, 2)]:
        seen = []
        for start, scored_from in score_windows(list(range(length)), window):
            seen.extend(range(scored_from, min(start + window, length)))
            assert start + window - scored_from <= window and scored_from >= start
        assert seen == list(range(1, length))


def test_engine_perplexity_matches_transformers(tmp_path):
    model_dir = make_tiny_checkpoint("glm4", tmp_path / "glm4")
    llm = LLM(model=str(model_dir), dtype="float32", max_context_len=512)
    result = evaluate_perplexity(llm, TEXT)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = torch.tensor([tokenizer.encode(TEXT)])
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.inference_mode():
        reference = model(ids, labels=ids).loss.item()
    assert result.num_scored_tokens == ids.shape[1] - 1
    assert math.isclose(result.loss_per_token, reference, rel_tol=1e-3)
    windowed = evaluate_perplexity(llm, TEXT, window=16)
    assert windowed.num_scored_tokens == result.num_scored_tokens
    assert windowed.loss_per_character > 0


def test_eval_ppl_command(tmp_path, capsys, caplog):
    model_dir = make_tiny_checkpoint("llama", tmp_path / "llama")
    text_file = tmp_path / "text.txt"
    text_file.write_text(TEXT)
    assert main(["eval-ppl", "--model", str(model_dir), "--text", str(text_file), "--dtype", "float32"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("characters: ")
    assert "loss per character" in captured.out
    assert f"model: {model_dir}" in caplog.messages
    assert re.search(r"scoring perplexity: 100%\|.*\| (\d+)/\1 passages", captured.err)  # says what it counts
