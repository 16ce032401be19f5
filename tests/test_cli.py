"""The command line's flags: grouped settings, defaults in the help, booleans, precedence, entry points."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from autoglm import __version__
from autoglm.cli.main import build_parser, main
from autoglm.cli.settings import config_from_args
from autoglm.config import AutoGLMConfig, SettingGroup

REPO_ROOT = Path(__file__).resolve().parent.parent
ENGINE_COMMANDS = (["generate"], ["serve"], ["eval-ppl"], ["bench", "throughput"], ["bench", "latency"])
SERVER_FLAGS = ("--host", "--port", "--served-model-name", "--max-waiting-requests", "--request-timeout-s",
                "--drain-timeout-s", "--log-stats-interval-s")


def subcommand(path: list[str]) -> argparse.ArgumentParser:
    """The parser of ``autoglm <path...>``."""
    parser = build_parser()
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"autoglm {__version__}"


@pytest.mark.timeout(120)
def test_python_dash_m_autoglm_runs_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "autoglm", "--version"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == f"autoglm {__version__}"


def test_only_serve_lists_server_settings() -> None:
    assert set(SERVER_FLAGS) <= option_strings(subcommand(["serve"]))
    for path in ENGINE_COMMANDS:
        if path != ["serve"]:
            assert not set(SERVER_FLAGS) & option_strings(subcommand(path)), path


@pytest.mark.parametrize("path", ENGINE_COMMANDS, ids=" ".join)
def test_every_flag_has_help_and_every_setting_shows_its_default(path: list[str]) -> None:
    parser = subcommand(path)
    for action in parser._actions:
        if action.option_strings and not isinstance(action, argparse._HelpAction):
            assert action.help, f"{action.option_strings} has no help"
            if action.dest in AutoGLMConfig.model_fields:
                assert "(default: " in action.help, action.option_strings


def test_setting_flags_sit_under_their_group_heading() -> None:
    headings = {group.title: {action.dest for action in group._group_actions}
                for group in subcommand(["serve"])._action_groups}
    for name in AutoGLMConfig.field_names():
        assert name in headings[f"{AutoGLMConfig.group_of(name).value} settings"]
    assert set(headings["KV cache settings"]) == {
        name for name in AutoGLMConfig.field_names() if AutoGLMConfig.group_of(name) is SettingGroup.CACHE}


def test_help_shows_setting_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["generate", "--help=all"])
    help_text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "Tokens per KV cache block. (default: 16)" in help_text
    assert "--enable-prefix-caching, --no-enable-prefix-caching" in help_text
    assert "always off without paged attention. (default: true)" in help_text
    assert "tokens to generate per prompt (default: 64)" in help_text


def test_boolean_settings_are_switches() -> None:
    parse = build_parser().parse_args
    assert parse(["serve", "--no-enable-prefix-caching"]).enable_prefix_caching is False
    assert parse(["serve", "--enable-prefix-caching"]).enable_prefix_caching is True
    assert parse(["serve"]).enable_prefix_caching is None  # not given: the file or environment decides
    with pytest.raises(SystemExit):
        parse(["serve", "--enable-prefix-caching", "false"])


def test_list_settings_show_their_default_and_take_comma_separated_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help=server"])
    assert "CORS off. (default: none)" in " ".join(capsys.readouterr().out.split())
    args = build_parser().parse_args(["serve", "--cors-allowed-origins", "http://a.example,http://b.example"])
    assert config_from_args(args).cors_allowed_origins == ("http://a.example", "http://b.example")


def test_max_model_len_is_an_alias_flag() -> None:
    args = build_parser().parse_args(["generate", "hi", "--max-model-len", "128"])
    assert config_from_args(args).max_context_len == 128


def test_settings_precedence_is_file_then_environment_then_flags(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    settings_file = tmp_path / "engine.yaml"
    settings_file.write_text("block_size: 8\nseed: 1\nmax_num_seqs: 4\nenable_prefix_caching: false\nport: 9000\n")
    monkeypatch.setenv("AUTOGLM_SEED", "2")
    monkeypatch.setenv("AUTOGLM_MAX_NUM_SEQS", "5")
    args = build_parser().parse_args(["serve", "--config", str(settings_file), "--max-num-seqs", "6"])
    config = config_from_args(args)
    assert config.block_size == 8  # the file alone
    assert config.seed == 2  # the environment over the file
    assert config.max_num_seqs == 6  # the flag over both
    assert config.enable_prefix_caching is False and config.port == 9000  # flags not given leave the file's
    assert config.max_num_batched_tokens == AutoGLMConfig().max_num_batched_tokens  # set nowhere


def test_a_command_default_yields_to_the_file_and_environment(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Benchmarks default to bfloat16, below every source a user writes."""
    parse = build_parser().parse_args
    assert config_from_args(parse(["bench", "throughput"])).dtype == "bfloat16"
    settings_file = tmp_path / "engine.json"
    settings_file.write_text(json.dumps({"dtype": "float32"}))
    assert config_from_args(parse(["bench", "latency", "--config", str(settings_file)])).dtype == "float32"
    monkeypatch.setenv("AUTOGLM_DTYPE", "float16")
    assert config_from_args(parse(["bench", "throughput"])).dtype == "float16"
    dtype_flag = next(a for a in subcommand(["bench", "throughput"])._actions if a.dest == "dtype")
    assert dtype_flag.help.endswith("(default: bfloat16)")


def test_a_bad_setting_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "hi", "--block-size", "0"]) == 2
    assert capsys.readouterr().err == (
        "error: block_size: got '0' from arguments; expected an integer between 1 and 256\n")
