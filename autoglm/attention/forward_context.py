"""What the attention layers of one model read during a forward pass: its backend and the step's metadata.

Each runner owns one context and binds it to its model's layers, as it binds their KV cache, so
two engines in one process never see each other's metadata.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

from autoglm.attention.backend import AttentionBackend
from autoglm.attention.metadata import AttentionMetadata


@dataclass
class ForwardContext:
    backend: AttentionBackend
    metadata: AttentionMetadata | None = None  # set only while a step's forward runs

    @contextlib.contextmanager
    def step(self, metadata: AttentionMetadata) -> Iterator[None]:
        """Make ``metadata`` what the bound layers read for the duration of one forward."""
        previous, self.metadata = self.metadata, metadata
        try:
            yield
        finally:
            self.metadata = previous
