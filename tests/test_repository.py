"""What a user who clones the repository reads: the settings table in docs/SETTINGS.md, the example config, no outside paths."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from autoglm.cli.main import build_parser
from autoglm.cli.settings import config_from_args
from autoglm.config import AutoGLMConfig
from autoglm.config.reference import BEGIN, END

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_CONFIG = REPO_ROOT / "examples" / "engine.yaml"
# Folders and files of the project itself, not what installing or running it leaves behind.
PROJECT_PARTS = ("autoglm", "deploy", "docs", "examples", "tests", "tools", "README.md", "Makefile", "pyproject.toml",
                 "Dockerfile", "Dockerfile.cuda", "docker-compose.yaml")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".json", ".txt", ".cpp", ".h", ""}


def settings_table_names() -> set[str]:
    """The backquoted names in the first column of docs/SETTINGS.md's generated settings tables."""
    document = (REPO_ROOT / "docs" / "SETTINGS.md").read_text(encoding="utf-8")
    section = document.split(BEGIN, 1)[1].split(END, 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    return {name for cell in first_cells for name in re.findall(r"`(\w+)`", cell)}


def test_readme_lists_every_setting() -> None:
    assert set(AutoGLMConfig.field_names()) <= settings_table_names()


def test_example_config_holds_every_setting_and_the_cli_takes_it() -> None:
    assert set(yaml.safe_load(EXAMPLE_CONFIG.read_text())) == set(AutoGLMConfig.field_names())
    args = build_parser().parse_args(["serve", "--config", str(EXAMPLE_CONFIG)])
    assert config_from_args(args) == AutoGLMConfig()  # it shows the defaults


def test_nothing_points_outside_the_repository() -> None:
    outside = "../" + "shared"  # spelled in two parts so this file does not match itself
    files = [path for part in PROJECT_PARTS for path in
             ((REPO_ROOT / part).rglob("*") if (REPO_ROOT / part).is_dir() else [REPO_ROOT / part])]
    offenders = [str(path.relative_to(REPO_ROOT)) for path in files
                 if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts
                 and outside in path.read_text(encoding="utf-8", errors="ignore")]
    assert offenders == []
