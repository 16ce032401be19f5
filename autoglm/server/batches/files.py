"""Files' contents on disk, one per id in one folder: each written whole under a temporary name, flushed,
then renamed into place, so a file that exists is complete."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

_TEMPORARY_PREFIX = ".writing-"


class FileContents:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, file_id: str) -> Path:
        return self.folder / file_id

    def write(self, file_id: str, chunks: Iterable[bytes]) -> int:
        """Write the file `file_id` from `chunks`, replacing one of the same id; its size in bytes."""
        self.folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=_TEMPORARY_PREFIX)
        size = 0
        try:
            with os.fdopen(handle, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
                    size += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path(file_id))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return size

    def delete(self, file_id: str) -> None:
        self.path(file_id).unlink(missing_ok=True)

    def remove_strays(self, kept: set[str]) -> None:
        """Delete what no stored file owns: writes a crash cut short, files whose record was deleted before
        their contents were. Only while nothing is being written (as the server starts)."""
        if not self.folder.is_dir():
            return
        for entry in self.folder.iterdir():
            if entry.name not in kept:
                entry.unlink(missing_ok=True)
