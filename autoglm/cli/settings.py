"""One command-line flag per engine setting, grouped by what it affects, and the settings they make.

A flag that is not given stays None, so it never overrides the settings file or the AUTOGLM_*
environment; its help shows the setting's default instead.
"""
from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Le

from autoglm.cli.help import add_grouped_help
from autoglm.cli.logging import add_logging_arguments
from autoglm.config import AutoGLMConfig, SettingGroup
from autoglm.config.settings import SERVER_GROUPS, SETTING_ALIASES
from autoglm.model_paths import DEFAULT_MODEL_DIR, DEFAULT_MODEL_NAME

logger = logging.getLogger("autoglm.cli")
# Placeholders in the help for what a setting's type takes, where its field names none and its name no unit.
_KIND_METAVARS = {int: "N", float: "NUMBER", str: "TEXT", bool: "true|false"}
# Setting names' endings that name their unit.
_UNIT_METAVARS = {"_s": "SECONDS", "_bytes": "BYTES"}
# vLLM's short flags for our settings (its long spellings that differ are SETTING_ALIASES).
VLLM_SHORT_FLAGS = {"tensor_parallel_size": "-tp", "pipeline_parallel_size": "-pp"}
# vLLM flags that have no setting of the same meaning here, each refused with what to write instead.
VLLM_REFUSED_FLAGS = {
    "--gpu-memory-utilization": (
        "vLLM's share of device memory for weights, activations and KV cache together has no equal here, where "
        "only the KV cache is sized: leave it out (the KV cache then takes its share of what stays free after the "
        "weights and steps), or write --kv-cache-memory 16GiB (a size) or --kv-cache-memory 0.5 (a fraction of "
        "device memory for the KV cache alone)"
    ),
    "--trust-remote-code": "autoglm runs no code from a checkpoint, it implements the architectures it loads: "
                           "leave it out",
    "--distributed-executor-backend": "autoglm always starts its tensor-parallel workers as processes: leave it "
                                      "out (--distributed-backend gloo|nccl chooses how they exchange activations)",
    "--swap-space": "autoglm keeps no KV cache in host memory (a preempted request is recomputed): leave it out",
    "--cpu-offload-gb": "autoglm keeps every weight on the device: leave it out, or shrink the weights with "
                        "--quantization int8 or --quantization int4",
    "--allowed-origins": "write --cors-allowed-origins with the origins comma-separated, as in "
                         "--cors-allowed-origins 'https://a.example,https://b.example'",
    "--disable-log-requests": "a request's log line holds its prompt only under --log-prompts: leave it out, or "
                              "write --log-level warning to drop every info line",
    "--download-dir": "autoglm loads a checkpoint folder on disk: give its path as --model FOLDER",
}


class _RefusedFlag(argparse.Action):
    """A vLLM flag this command line does not take: the parse stops, saying what to write instead."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser.error(f"{option_string}: {VLLM_REFUSED_FLAGS[option_string]}")


def add_draw_arguments(group: argparse._ArgumentGroup) -> None:
    """``--temperature``, ``--top-p`` and ``--top-k``, as every command that generates takes them."""
    group.add_argument("--temperature", type=float, default=0.0, metavar="NUMBER",
                       help="0 picks the likeliest token (greedy); higher values sample more freely (default: 0)")
    group.add_argument("--top-p", type=float, default=1.0, metavar="FRACTION",
                       help="sample from the likeliest tokens whose probabilities add up to this (default: 1)")
    group.add_argument("--top-k", type=int, default=0, metavar="N",
                       help="sample from this many likeliest tokens; 0 means all (default: 0)")


def add_config_arguments(
    parser: argparse.ArgumentParser,
    with_server_settings: bool = False,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """``--config FILE``, the logging flags and one ``--kebab-case`` flag per setting, under a heading per group;
    ``--help`` shows the common ones and ``--help=GROUP`` the others.

    Server and Ray Serve settings only matter to ``serve``; `defaults` replace built-in defaults for this command
    (below the file and the environment) and show in the help. vLLM's flags that mean nothing here are refused,
    naming what to write instead.
    """
    add_grouped_help(parser)
    parser.add_argument(
        "--config", metavar="FILE",
        help="settings file (YAML, JSON or TOML); AUTOGLM_<SETTING> variables override it, flags override both",
    )
    add_logging_arguments(parser)
    defaults = dict(defaults or {})
    headings = {
        group: parser.add_argument_group(f"{group.value} settings")
        for group in SettingGroup
        if with_server_settings or group not in SERVER_GROUPS
    }
    for name in AutoGLMConfig.field_names():
        heading = headings.get(AutoGLMConfig.group_of(name))
        if heading is not None:
            _add_setting_flag(heading, name, defaults.get(name, AutoGLMConfig.model_fields[name].default))
    for flag in VLLM_REFUSED_FLAGS:
        parser.add_argument(flag, nargs="?", action=_RefusedFlag, help=argparse.SUPPRESS)
    parser.set_defaults(setting_defaults=defaults)


def _add_setting_flag(heading: argparse._ArgumentGroup, name: str, default: Any) -> None:
    field = AutoGLMConfig.model_fields[name]
    # argparse %-formats help strings.
    help_text = f"{field.description} (default: {_shown(default)})".replace("%", "%%")
    flags = [_flag(name)] + [_flag(alias) for alias, target in SETTING_ALIASES.items() if target == name]
    flags += [VLLM_SHORT_FLAGS[name]] if name in VLLM_SHORT_FLAGS else []
    if field.annotation is bool:
        heading.add_argument(*flags, dest=name, default=None, action=argparse.BooleanOptionalAction, help=help_text)
    else:  # a list setting may take several values after its flag, as vLLM's --lora-modules does
        heading.add_argument(*flags, dest=name, default=None, metavar=_metavar(name), help=help_text,
                             nargs=field.json_schema_extra.get("nargs"))


def _metavar(name: str) -> str:
    """The placeholder of a setting's flag: its field's own, else the unit its name ends in, else its kind."""
    field = AutoGLMConfig.model_fields[name]
    if "metavar" in field.json_schema_extra:
        return field.json_schema_extra["metavar"]
    unit = next((unit for ending, unit in _UNIT_METAVARS.items() if name.endswith(ending)), None)
    if unit is not None:
        return unit
    if any(isinstance(bound, Le) and bound.le == 1 for bound in field.metadata):
        return "FRACTION"
    return "|".join(_kinds(field.annotation))


def _kinds(annotation: Any) -> list[str]:
    """What a value of `annotation` may be, as placeholders: a Literal's values, else its type's kind."""
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        return [kind for arg in get_args(annotation) if arg is not NoneType for kind in _kinds(arg)]
    if origin is Annotated:
        return _kinds(get_args(annotation)[0])
    if origin is Literal:
        return [str(value) for value in get_args(annotation)]
    return [_KIND_METAVARS.get(annotation, "VALUE")]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _shown(value: Any) -> str:
    """A default as a user would write it in a settings file."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ", ".join(value) or "none"
    return "unset" if value is None else str(value)


def config_from_args(args: argparse.Namespace) -> AutoGLMConfig:
    """The command's defaults, then ``--config``, then AUTOGLM_* variables, then the flags given."""
    overrides = {name: getattr(args, name) for name in AutoGLMConfig.field_names() if hasattr(args, name)}
    return AutoGLMConfig.from_sources(args.config, overrides=overrides, defaults=args.setting_defaults)


def announced_config(args: argparse.Namespace) -> AutoGLMConfig:
    """The settings of a command that loads a model, the model named before anything slow starts."""
    config = config_from_args(args)
    announce_model(config)
    return config


def announce_model(config: AutoGLMConfig) -> None:
    """Say which model runs, the embedded default included, before anything slow starts."""
    if config.model is None:
        logger.info("model: the embedded default %s (%s)", DEFAULT_MODEL_NAME, DEFAULT_MODEL_DIR)
    else:
        logger.info("model: %s", config.model)
