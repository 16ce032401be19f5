"""The docs' quick shell commands run as written: each ```bash block of README.md and docs/*.md that a
`<!-- doc-test -->` line marks runs in a fresh folder and must succeed, and where a ```text block follows it
(the output the docs show), its lines must be in what the commands printed. Blocks that talk to
http://127.0.0.1:8000 talk to one test server of the embedded default model instead.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from autoglm.bench.cli import add_bench_commands
from autoglm.model_paths import DEFAULT_MODEL_DIR

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = "<!-- doc-test -->"
DOC_SERVER = "http://127.0.0.1:8000"
# Long or machine-changing commands: no command of a marked block may start so.
LONG_COMMANDS = re.compile(r"^(\.venv/bin/)?(make|autoglm bench|autoglm serve|pip|apt-get|docker|kubectl)\b")
BLOCK = re.compile(r"^" + re.escape(MARKER) + r"\n```(?:bash|sh)\n(?P<script>.*?)\n```\n"
                   r"(?:\n```text\n(?P<output>.*?)\n```\n)?", re.MULTILINE | re.DOTALL)
COMMAND_TIMEOUT_S = 120


@dataclass(frozen=True)
class DocBlock:
    where: str  # file:line
    script: str
    output: str | None


def marked_blocks() -> list[DocBlock]:
    blocks = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            blocks.append(DocBlock(f"{doc.relative_to(ROOT)}:{line}", match["script"], match["output"]))
    return blocks


BLOCKS = marked_blocks()


def test_every_marker_marks_a_block_and_none_runs_a_long_command():
    markers = sum(doc.read_text(encoding="utf-8").count(MARKER) for doc in DOCS)
    assert markers == len(BLOCKS), "a doc-test marker must stand right before a ```bash block"
    assert len(BLOCKS) >= 5  # help and version, keys, quantize, the server's curls
    for block in BLOCKS:
        assert not [line for line in block.script.splitlines() if LONG_COMMANDS.match(line.strip())], block.where


@pytest.fixture(scope="module")
def doc_server():
    from tests.server.live_server import start_server

    running = start_server(DEFAULT_MODEL_DIR)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def commands_folder(tmp_path_factory) -> Path:
    """`autoglm` and `.venv/bin/autoglm` as the docs write them, both this checkout's."""
    folder = tmp_path_factory.mktemp("doc-commands")
    launcher = f'#!/bin/sh\nexec "{sys.executable}" -m autoglm "$@"\n'
    for path in (folder / "bin" / "autoglm", folder / ".venv" / "bin" / "autoglm"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(launcher)
        path.chmod(0o755)
    return folder


@pytest.mark.parametrize("block", BLOCKS, ids=[block.where for block in BLOCKS])
def test_a_marked_block_runs_as_the_docs_show(block, commands_folder, tmp_path, request):
    script = block.script
    if DOC_SERVER in script:
        script = script.replace(DOC_SERVER, request.getfixturevalue("doc_server").url)
    (tmp_path / ".venv").symlink_to(commands_folder / ".venv")
    env = {**os.environ, "PATH": f"{commands_folder / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, f"{block.where} failed:\n{done.stdout}\n{done.stderr}"
    printed = done.stdout + done.stderr
    assert '"error":' not in done.stdout, f"{block.where} was answered with an error:\n{done.stdout}"
    for line in (block.output or "").splitlines():
        shown = r"\s+".join(re.escape(part).replace(re.escape("..."), ".*") for part in line.split())
        assert re.search(shown, printed), f"{block.where} did not print {line!r}; it printed:\n{printed}"


def test_the_bench_table_lists_every_bench_command():
    table = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8").split("| command |", 1)[1]
    listed = re.findall(r"^\| `([a-z-]+)", table.split("\n\n", 1)[0], re.MULTILINE)
    subcommands = argparse.ArgumentParser().add_subparsers()
    add_bench_commands(subcommands)
    assert sorted(listed) == sorted(subcommands.choices)
