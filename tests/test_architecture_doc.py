"""docs/ARCHITECTURE.md names the file behind every step and seam; a file that moves or goes must take
its name in the document with it."""
from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = REPO_ROOT / "docs" / "ARCHITECTURE.md"
# A backquoted path: folders end in a slash, files in a suffix.
PATH = re.compile(r"`((?:[\w.]+/)+(?:[\w.]+\.\w+)?)`")


def named_paths() -> list[str]:
    """The paths the document spells out from a top folder (``server/openai/chat.py``); a bare name such as
    ``access.py`` stands in a paragraph about its folder."""
    tops = {entry.name for root in (REPO_ROOT, REPO_ROOT / "autoglm") for entry in root.iterdir() if entry.is_dir()}
    return [path for path in PATH.findall(DOCUMENT.read_text(encoding="utf-8"))
            if "/" in path and path.split("/", 1)[0] in tops]


def exists(path: str) -> bool:
    """Paths are under autoglm/ unless they name a folder of the repository itself (docs/, tools/, tests/)."""
    return (REPO_ROOT / "autoglm" / path).exists() or (REPO_ROOT / path).exists()


def test_the_document_names_files_and_folders():
    paths = named_paths()
    assert len(paths) > 100 and "engine/input_processor.py" in paths and "server/openai/" in paths


def test_every_file_and_folder_the_document_names_exists():
    missing = sorted({path for path in named_paths() if not exists(path)})
    assert not missing, f"docs/ARCHITECTURE.md names paths that do not exist: {', '.join(missing)}"


def test_the_streamed_chat_request_is_followed_through_at_most_a_dozen_steps():
    section = DOCUMENT.read_text(encoding="utf-8").split("## A streamed chat request, file by file", 1)[1]
    steps = re.findall(r"^(\d+)\. ", section.split("\n## ", 1)[0], flags=re.MULTILINE)
    assert steps == [str(number) for number in range(1, len(steps) + 1)] and 8 <= len(steps) <= 12
