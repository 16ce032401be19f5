"""Benchmark results files, named as a document's markers name them: relative to the document."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ResultsFile:
    name: str  # as the marker wrote it, e.g. ``results/roofline-cpu.json``
    data: dict[str, Any]

    @property
    def machine(self) -> dict[str, Any]:
        machine = self.data.get("machine")
        if not machine:
            raise ValueError(f"{self.name} records no machine; add a 'machine' field saying what it ran on")
        return machine

    def at(self, dotted_path: str) -> Any:
        """The value at ``a.b.0.c``: keys of objects, indices of lists."""
        value: Any = self.data
        for key in dotted_path.split("."):
            try:
                value = value[int(key)] if isinstance(value, list) else value[key]
            except (KeyError, IndexError, ValueError):
                raise KeyError(f"{self.name} has nothing at {dotted_path!r} (no {key!r})") from None
        return value


@dataclass
class ResultsFolder:
    """Loads each file once, however many markers quote it."""

    document_folder: Path
    _loaded: dict[str, ResultsFile] = field(default_factory=dict)

    def load(self, name: str) -> ResultsFile:
        if name not in self._loaded:
            path = self.document_folder / name
            if not path.is_file():
                raise ValueError(f"no results file {path}")
            self._loaded[name] = ResultsFile(name, json.loads(path.read_text()))
        return self._loaded[name]
