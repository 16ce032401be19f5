"""``make serve`` and ``make test`` say what each install step installs before pip, quiet, works on it:
a first install is otherwise a silent minute. Run with a pip that only says what it was asked."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
FAKE_PIP = "PIP"


def installed_name(pip_line: str) -> str:
    """What a pip install line installs, as its announcement must name it: the project, or a package."""
    requirement = pip_line.split()[-1].strip('"')
    return "open-autoglm" if requirement.startswith(".") else requirement.split("==")[0]


def make_output(target: str, venv: Path, python: Path) -> list[str]:
    """The lines a make target prints (its commands not echoed), with a Python that has nothing installed."""
    return subprocess.run(["make", "-s", target, f"VENV={venv}", f"PY={python}", f"PIP=echo {FAKE_PIP}"],
                          cwd=REPOSITORY, capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.mark.parametrize("target", ["install", "install-test"])
def test_every_pip_install_is_announced_by_what_it_installs(tmp_path, target):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexit 1\n")  # no torch: the torch step runs too
    python.chmod(0o755)
    (tmp_path / "venv").mkdir()
    lines = make_output(target, tmp_path / "venv", python)
    installs = [index for index, line in enumerate(lines) if line.startswith(f"{FAKE_PIP} install")]
    assert installs, lines
    for index in installs:
        announcement = next(line for line in reversed(lines[:index]) if not line.startswith(FAKE_PIP))
        assert announcement.startswith("installing ") and installed_name(lines[index]) in announcement, \
            (lines[index], announcement)
        assert "first time: " in announcement  # how long to expect
