"""``--help`` that fits a screen: a command's own options and the settings a first user sets, the rest by group.

As vLLM's ``serve --help=GROUP``: ``--help=model`` (or any group's name) shows one group's flags, ``--help=list``
names the groups and ``--help=all`` shows every flag.
"""
from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from typing import Any

# Settings a plain --help shows, in this order, each in a line (each command shows those it has); the settings'
# own descriptions are for --help=GROUP.
COMMON_SETTINGS = {
    "model": "checkpoint folder in Hugging Face format; unset: the embedded default model",
    "served_model_name": "the model's name in the API; unset: the checkpoint folder's name",
    "host": "address to listen on",
    "port": "port to listen on",
    "dtype": "weight and activation dtype",
    "max_context_len": "longest prompt plus output, in tokens",
    "device": "where the model runs",
    "tensor_parallel_size": "processes the model is split across; must divide its attention heads",
    "quantization": "quantize the weights as they load (W8A16, W4A16)",
    "api_key": "one API key every request must carry",
}
ALL = "all"
LIST = "list"
_SETTINGS_SUFFIX = " settings"


class GroupedHelp(argparse.Action):
    """``-h``/``--help[=GROUP]``: print the help asked for and exit."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs="?", metavar="GROUP",
                         help=f"this help; --help=GROUP one group's options, --help={LIST} the groups, "
                              f"--help={ALL} every option")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        groups = option_groups(parser)
        if values is None:
            text = _common_help(parser, groups)
        elif values == ALL:
            text = parser.format_help()
        elif values == LIST:
            text = _group_list(parser, groups)
        elif values in groups:
            text = _format(parser, [groups[values]])
        else:
            parser.error(f"--help: no group {values!r}; groups: {', '.join([*groups, LIST, ALL])}")
        parser._print_message(text, sys.stdout)
        parser.exit()


def add_grouped_help(parser: argparse.ArgumentParser) -> None:
    """Replace argparse's ``-h``/``--help`` of `parser` with :class:`GroupedHelp`, and shorten its usage line
    to the positional arguments, the options written as ``[options]``."""
    # The flags join the parser's default group, whose conflict handler then lets them take over argparse's own.
    parser._optionals.conflict_handler = "resolve"
    parser.add_argument("-h", "--help", action=GroupedHelp)
    parser._optionals.conflict_handler = parser.conflict_handler
    positionals = [action for action in parser._actions if not action.option_strings]
    formatter = parser._get_formatter()
    formatter.add_usage(None, positionals, [], prefix="")
    parser.usage = "%(prog)s [options]" + formatter.format_help().strip().removeprefix(parser.prog)


def option_groups(parser: argparse.ArgumentParser) -> dict[str, argparse._ArgumentGroup]:
    """The parser's headed groups of options by the name ``--help=NAME`` takes ("KV cache settings": kv-cache)."""
    default_groups = (parser._positionals, parser._optionals)
    return {_group_name(group.title): group for group in parser._action_groups
            if group not in default_groups and group.title and group._group_actions}


def _group_name(title: str) -> str:
    return title.removesuffix(_SETTINGS_SUFFIX).lower().replace(" ", "-")


def _common_help(parser: argparse.ArgumentParser, groups: dict[str, argparse._ArgumentGroup]) -> str:
    """The command's own options, its groups that hold no setting, and the common settings, then the groups."""
    by_dest = {action.dest: action for group in groups.values() for action in group._group_actions}
    common = [_summarized(by_dest[name], summary) for name, summary in COMMON_SETTINGS.items() if name in by_dest]
    setting_groups = [group for group in groups.values() if group.title.endswith(_SETTINGS_SUFFIX)]
    own_groups = [group for group in groups.values() if group not in setting_groups]
    sections = [(group.title, group._group_actions)
                for group in (parser._positionals, parser._optionals, *own_groups) if group._group_actions]
    if common:
        sections.append(("common settings", common))
    names = ", ".join(_group_name(group.title) for group in setting_groups)
    epilog = (f"Every other setting: --help=GROUP, GROUP one of {names}; or --help={ALL}. A setting is also read "
              f"from --config FILE and AUTOGLM_<SETTING> variables.") if setting_groups else None
    return _format_sections(parser, sections, epilog)


def _summarized(action: argparse.Action, summary: str) -> argparse.Action:
    """`action` with `summary` as its help, still saying its default (its help's last words)."""
    shown = copy.copy(action)
    shown.help = summary + action.help[action.help.rfind(" (default: "):]
    return shown


def _group_list(parser: argparse.ArgumentParser, groups: dict[str, argparse._ArgumentGroup]) -> str:
    lines = [f"{parser.prog}: --help=GROUP shows one group's options; the groups:"]
    lines += [f"  {name:16} {group.title} ({len(group._group_actions)} options)" for name, group in groups.items()]
    lines.append(f"  {ALL:16} every option")
    return "\n".join(lines) + "\n"


def _format(parser: argparse.ArgumentParser, groups: list[argparse._ArgumentGroup]) -> str:
    return _format_sections(parser, [(group.title, group._group_actions) for group in groups], None)


def _format_sections(parser: argparse.ArgumentParser, sections: list[tuple[str, list[argparse.Action]]],
                     epilog: str | None) -> str:
    """The help's usage and description, the sections given, then `epilog`, as argparse lays them out."""
    formatter = parser._get_formatter()
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    formatter.add_text(parser.description)
    for title, actions in sections:
        formatter.start_section(title)
        formatter.add_arguments(actions)
        formatter.end_section()
    formatter.add_text(epilog)
    return formatter.format_help()
