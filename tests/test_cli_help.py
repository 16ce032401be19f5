"""``--help`` that fits a screen: the common flags first, every other one by group (``--help=GROUP``, ``--help=all``),
placeholders that name what a flag takes."""
from __future__ import annotations

import argparse
import re

import pytest

from autoglm.cli.help import COMMON_SETTINGS
from autoglm.cli.main import build_parser, main
from autoglm.config import AutoGLMConfig
from tests.test_cli import subcommand

SCREEN_LINES = 50
# A flag at the start of a help line, where argparse lists it (help texts may name other flags).
LISTED_FLAG = re.compile(r"^\s+(?:-\w+(?: \S+)?, )?(--[a-z0-9-]+)", re.MULTILINE)


@pytest.fixture(autouse=True)
def _eighty_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """argparse wraps help at the terminal's width: measure on a classic 80-column screen."""
    monkeypatch.setenv("COLUMNS", "80")


def help_text(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def listed_flags(text: str) -> set[str]:
    return set(LISTED_FLAG.findall(text))


def test_serve_help_fits_a_screen_with_the_common_flags_first(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(["serve", "--help"], capsys)
    assert len(text.splitlines()) <= SCREEN_LINES
    assert text.splitlines()[0] == "usage: autoglm serve [options]"
    assert {flag(name) for name in COMMON_SETTINGS} | {"--config", "--help"} <= listed_flags(text)
    assert "--help=kv-cache" not in text and "kv-cache" in text  # the groups are named, not shown
    assert flag("block_size") not in text


def test_every_setting_is_listed_by_help_all(capsys: pytest.CaptureFixture[str]) -> None:
    assert {flag(name) for name in AutoGLMConfig.field_names()} <= listed_flags(help_text(["serve", "--help=all"],
                                                                                          capsys))


def test_each_group_help_lists_that_groups_settings_alone(capsys: pytest.CaptureFixture[str]) -> None:
    groups = {AutoGLMConfig.group_of(name) for name in AutoGLMConfig.field_names()}
    for group in groups:
        name = group.value.lower().replace(" ", "-")
        expected = {flag(setting) for setting in AutoGLMConfig.field_names()
                    if AutoGLMConfig.group_of(setting) is group}
        assert listed_flags(help_text(["serve", f"--help={name}"], capsys)) == expected, name


def test_help_list_names_every_group_and_an_unknown_group_is_a_usage_error(
        capsys: pytest.CaptureFixture[str]) -> None:
    listing = help_text(["serve", "--help=list"], capsys)
    for name in ("model", "kv-cache", "scheduling", "server", "tenants", "response-cache", "ray-serve", "all"):
        assert re.search(rf"^  {name} ", listing, re.MULTILINE), name
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--help=schedulr"])
    assert exit_info.value.code == 2
    assert "no group 'schedulr'; groups: output, model" in capsys.readouterr().err


def test_a_command_with_prompts_names_them_in_its_short_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert help_text(["generate", "--help"], capsys).splitlines()[0] == (
        "usage: autoglm generate [options] PROMPT [PROMPT ...]")


def setting_metavars() -> dict[str, str]:
    return {action.dest: action.metavar for action in subcommand(["serve"])._actions
            if action.dest in AutoGLMConfig.model_fields and action.metavar is not None}


def test_seconds_is_the_placeholder_of_times_alone() -> None:
    """A setting in seconds says so in its name's `_s`; rates, counts and GPU shares are no times."""
    for name, metavar in setting_metavars().items():
        assert (metavar == "SECONDS") == name.endswith("_s"), (name, metavar)


def test_every_placeholder_names_a_kind_or_a_unit() -> None:
    metavars = setting_metavars()
    assert set(metavars) == {name for name, field in AutoGLMConfig.model_fields.items() if field.annotation is not bool}
    assert not [name for name, metavar in metavars.items() if "VALUE" in metavar.split("|")]
    assert metavars["auto_rollback_max_error_rate"] == "FRACTION"
    assert metavars["dtype"] == "auto|float32|bfloat16|float16"
    assert metavars["max_request_body_bytes"] == "BYTES"


def test_descriptions_say_unset_not_none() -> None:
    for name, field in AutoGLMConfig.model_fields.items():
        assert not re.search(r"\bNone\b", field.description or ""), name


def test_the_short_help_keeps_a_commands_own_default(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(help_text(["bench", "throughput", "--help"], capsys).split())
    assert "weight and activation dtype (default: bfloat16)" in text
    assert build_parser().parse_args(["serve", "--dtype", "bf16"]).dtype == "bf16"


def parsers_below(parser: argparse.ArgumentParser,
                  path: tuple[str, ...] = ()) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every subcommand's parser under `parser`, by its path of names."""
    found = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found |= parsers_below(child, (*path, name))
    return found


def test_every_flag_that_takes_a_value_names_its_kind() -> None:
    """argparse's own placeholder is the flag's name in capitals (--top-p TOP_P), which says nothing of its kind."""
    unnamed = [(path, action.option_strings) for path, parser in parsers_below(build_parser()).items()
               if path[:1] != ("bench",) for action in parser._actions
               if action.option_strings and action.nargs != 0 and action.help != argparse.SUPPRESS
               and action.metavar is None and action.choices is None]
    assert unnamed == []
