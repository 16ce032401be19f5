"""What the command line says while it works: start-up stages and progress at INFO, less when asked."""
from __future__ import annotations

import logging

import pytest

from autoglm.cli.main import main
from autoglm.cli.logging import chosen_log_level
from autoglm.config import ConfigError
from autoglm.progress import show_progress
from tests.tiny_models import make_tiny_checkpoint


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return make_tiny_checkpoint("llama", tmp_path_factory.mktemp("llama"))


def generate(model, *flags: str) -> int:
    return main(["generate", "Hello", "--max-tokens", "2", "--model", str(model), "--dtype", "float32", *flags])


def test_start_up_stages_are_logged_by_default(tiny_model, caplog, capsys) -> None:
    assert generate(tiny_model) == 0
    messages = caplog.messages
    assert messages[0] == f"model: {tiny_model}"
    assert any(message.startswith(f"loading LlamaForCausalLM from {tiny_model}") for message in messages)
    assert any(message.startswith("loading the tokenizer") for message in messages)
    assert any(message.startswith("KV cache holds ") and " engine ready in " in message for message in messages)
    assert "generate: 100%" in capsys.readouterr().err


def test_quiet_keeps_only_warnings_and_the_results(tiny_model, caplog, capsys) -> None:
    assert generate(tiny_model, "--quiet") == 0
    assert not [record for record in caplog.records if record.levelno < logging.WARNING]
    captured = capsys.readouterr()
    assert captured.err == "" and "--- prompt: 'Hello'" in captured.out


def test_the_flag_beats_the_environment_which_beats_the_default() -> None:
    assert chosen_log_level(None, False, {}) == "info"
    assert chosen_log_level(None, False, {"AUTOGLM_LOG_LEVEL": "DEBUG"}) == "debug"
    assert chosen_log_level("error", False, {"AUTOGLM_LOG_LEVEL": "debug"}) == "error"
    assert chosen_log_level(None, True, {"AUTOGLM_LOG_LEVEL": "debug"}) == "warning"


def test_a_bad_log_level_variable_names_the_choices(monkeypatch, capsys) -> None:
    with pytest.raises(ConfigError, match="AUTOGLM_LOG_LEVEL: got 'loud'; expected one of debug, info, warning"):
        chosen_log_level(None, False, {"AUTOGLM_LOG_LEVEL": "loud"})
    monkeypatch.setenv("AUTOGLM_LOG_LEVEL", "loud")
    assert main(["generate", "hi", "--model", "/nowhere"]) == 2
    assert capsys.readouterr().err.startswith("error: AUTOGLM_LOG_LEVEL: got 'loud'")


def test_progress_bars_follow_the_log_level() -> None:
    logger = logging.getLogger("autoglm")
    logger.setLevel(logging.INFO)
    assert show_progress()
    logger.setLevel(logging.WARNING)
    assert not show_progress()
