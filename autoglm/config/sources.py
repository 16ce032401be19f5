"""Where settings come from: a file (YAML, JSON or TOML), ``AUTOGLM_<SETTING>`` environment variables, then
arguments such as CLI flags; each layer overrides the one before. Every bad value is reported as a
`ConfigError` naming where it came from and what is allowed, so a user never has to read a validation
traceback to fix a typo.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import NoneType
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ENV_PREFIX = "AUTOGLM_"
# Variables that share the prefix but are read elsewhere, so they are not settings.
NON_SETTING_ENV_VARS = frozenset(
    {"AUTOGLM_HOME", "AUTOGLM_LOG_LEVEL", "AUTOGLM_CPU_DISABLE_FLAGS", "AUTOGLM_KERNEL_CACHE"}
)
ARGUMENT_SOURCE = "arguments"
DEFAULTS_SOURCE = "the command's defaults"
_FILE_SUFFIXES = (".yaml", ".yml", ".json", ".toml")
_BOUND_SYMBOLS = {"ge": ">=", "gt": ">", "le": "<="}
_KIND_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false", NoneType: "null"}


class ConfigError(ValueError):
    """A setting is unknown or has a value the engine cannot use."""


@dataclass
class SourcedSettings:
    """Values by setting name, each remembering where it came from for error messages."""

    fields: Mapping[str, FieldInfo]  # the settings there are, by name
    aliases: Mapping[str, str]  # other engines' names for them
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def add_layer(self, entries: Iterable[tuple[Any, Any, str]]) -> None:
        """Add (key, value, source) entries over earlier layers; within a layer each setting may appear once."""
        first_seen: dict[str, tuple[Any, str]] = {}
        for key, value, source in entries:
            name = self._setting_name(key, source)
            if name in first_seen:
                earlier_key, earlier_source = first_seen[name]
                raise ConfigError(
                    f"setting '{name}' is given twice: as {earlier_key!r} in {earlier_source} "
                    f"and as {key!r} in {source}; give it once"
                )
            first_seen[name] = (key, source)
            self.values[name] = value
            self.sources[name] = source

    def _setting_name(self, key: Any, source: str) -> str:
        """The field name `key` stands for, or an error suggesting the closest real one."""
        name = self.aliases.get(key, key)
        if name in self.fields:
            return name
        valid = tuple(self.fields)
        close = difflib.get_close_matches(str(key).lower(), valid + tuple(self.aliases), n=1)
        suggestion = f"; did you mean '{close[0]}'?" if close else "."
        raise ConfigError(f"unknown setting {key!r} in {source}{suggestion} Valid settings: {', '.join(valid)}")

    def explain(self, error: ValidationError) -> str:
        """One line per bad setting: its name, the value, where it came from and what is allowed."""
        return "\n".join(self._explain_problem(problem) for problem in error.errors())

    def _explain_problem(self, problem: ErrorDetails) -> str:
        name = str(problem["loc"][0])
        if problem["type"] == "value_error":  # raised by our own validators, already worded for a user
            reason = str(problem["ctx"]["error"])
        else:
            reason = "expected " + _expectation(self.fields[name])
        return f"{name}: got {problem['input']!r} from {self.sources[name]}; {reason}"


def env_settings(env: Mapping[str, str]) -> Iterator[tuple[str, str, str]]:
    """(key, value, source) for each AUTOGLM_* variable that names a setting."""
    for variable, value in sorted(env.items()):
        if variable.startswith(ENV_PREFIX) and variable not in NON_SETTING_ENV_VARS:
            yield variable.removeprefix(ENV_PREFIX).lower(), value, f"environment variable {variable}"


def read_settings_file(path: Path) -> dict[Any, Any]:
    """The top-level mapping of a YAML, JSON or TOML file, chosen by suffix."""
    suffix = path.suffix.lower()
    if suffix not in _FILE_SUFFIXES:
        raise ConfigError(
            f"cannot read settings from {path}: unknown file type {path.suffix!r}; allowed: {', '.join(_FILE_SUFFIXES)}"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"settings file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read settings file {path}: {error}") from None
    try:
        if suffix == ".json":
            data = json.loads(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = yaml.safe_load(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, yaml.YAMLError) as error:
        raise ConfigError(f"malformed settings file {path}: {_syntax_problem(error)}") from None
    if data is None:  # an empty YAML file, or one holding only comments
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"settings file {path} must hold a mapping of setting names to values at the top level, "
            f"not {type(data).__name__}"
        )
    return data


def _syntax_problem(error: Exception) -> str:
    """The parser's complaint, led by the line where the parser gives one."""
    if isinstance(error, json.JSONDecodeError):
        return f"line {error.lineno}, column {error.colno}: {error.msg}"
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {error.problem}"
    return str(error)  # tomllib already writes the line into its message


def _expectation(info: FieldInfo) -> str:
    """What a field accepts, in words, read from its type and bounds."""
    if get_origin(info.annotation) is Literal:
        return "one of " + ", ".join(repr(choice) for choice in get_args(info.annotation))
    kinds = get_args(info.annotation) or (info.annotation,)
    words = [_kind_words(kind) for kind in kinds]
    words[0] += _bounds(info.metadata)
    return " or ".join(words)


def _kind_words(kind: Any) -> str:
    """One member of a field's type in words: a plain type, a literal choice, or a type with its own bounds."""
    if get_origin(kind) is Literal:
        return " or ".join(repr(choice) for choice in get_args(kind))
    if get_origin(kind) is Annotated:
        base, *rules = get_args(kind)
        return _kind_words(base) + _bounds([bound for rule in rules for bound in getattr(rule, "metadata", [rule])])
    return _KIND_WORDS[kind]


def _bounds(metadata: list[Any]) -> str:
    """A field's numeric limits in words, e.g. ' between 1 and 256' or ' > 0'."""
    limits = {name: getattr(rule, name) for rule in metadata for name in _BOUND_SYMBOLS if hasattr(rule, name)}
    if limits.keys() == {"ge", "le"}:
        return f" between {limits['ge']} and {limits['le']}"
    return "".join(f" {symbol} {limits[name]}" for name, symbol in _BOUND_SYMBOLS.items() if name in limits)
