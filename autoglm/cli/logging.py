"""How much the command line says: start-up stages and progress bars at INFO unless asked for less.

The level comes from ``--log-level`` or ``--quiet``, else the AUTOGLM_LOG_LEVEL variable, else INFO.
It applies to the ``autoglm`` loggers; other libraries keep logging warnings only.
"""
from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Mapping

from autoglm.config import ConfigError

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_LEVEL_ENV = "AUTOGLM_LOG_LEVEL"
DEFAULT_LOG_LEVEL = "info"
QUIET_LOG_LEVEL = "warning"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def add_logging_arguments(parser: argparse.ArgumentParser) -> None:
    heading = parser.add_argument_group("output")
    choice = heading.add_mutually_exclusive_group()
    choice.add_argument(
        "--log-level", choices=LOG_LEVELS, type=str.lower,
        help=f"least important messages shown, progress bars included at info "
             f"(default: {LOG_LEVEL_ENV} or {DEFAULT_LOG_LEVEL})",
    )
    choice.add_argument("-q", "--quiet", action="store_true",
                        help=f"warnings and errors only, no progress bars (--log-level {QUIET_LOG_LEVEL})")


def chosen_log_level(log_level: str | None, quiet: bool, env: Mapping[str, str]) -> str:
    """The level the flags ask for, else the environment's, else INFO."""
    if quiet:
        return QUIET_LOG_LEVEL
    if log_level is not None:
        return log_level
    from_env = env.get(LOG_LEVEL_ENV, DEFAULT_LOG_LEVEL).strip().lower()
    if from_env not in LOG_LEVELS:
        raise ConfigError(f"{LOG_LEVEL_ENV}: got {from_env!r}; expected one of {', '.join(LOG_LEVELS)}")
    return from_env


def configure_logging(args: argparse.Namespace) -> None:
    """Print the ``autoglm`` loggers' messages at the chosen level to stderr."""
    logging.basicConfig(format=LOG_FORMAT, datefmt="%H:%M:%S")
    level = chosen_log_level(args.log_level, args.quiet, os.environ)
    logging.getLogger("autoglm").setLevel(level.upper())

