"""The store and the files' contents under the data folder. The store's file is made when a tenant first
keeps something, so a server that never takes a file or a batch writes nothing there."""
from __future__ import annotations

from pathlib import Path

from autoglm.server.batches.files import FileContents
from autoglm.server.batches.store import BatchStore

STORE_FILE = "batches.sqlite"
CONTENTS_FOLDER = "files"


class BatchStorage:
    def __init__(self, folder: Path) -> None:
        self.contents = FileContents(folder / CONTENTS_FOLDER)
        self._path = folder / STORE_FILE
        self._store: BatchStore | None = None

    def open_existing(self) -> None:
        """Open the store kept by an earlier run, if any, and delete contents no stored file owns. Once, as the
        server starts, before anything is written."""
        if self._store is None and self._path.exists():
            self._store = BatchStore(self._path)
            self.contents.remove_strays(self._store.file_ids())

    def existing(self) -> BatchStore | None:
        """The store, if anything has been kept yet."""
        return self._store

    def store(self) -> BatchStore:
        """The store, made now if nothing has been kept yet."""
        if self._store is None:
            self._store = BatchStore(self._path)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
