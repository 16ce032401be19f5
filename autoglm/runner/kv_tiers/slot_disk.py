"""One rank's link between its host slots and the disk tier.

Every rank of a tensor- or pipeline-parallel engine keeps its own share of each block (its heads, its layers),
so every rank writes and reads its own block files. The engine decides which block each slot holds; each rank
learns it from the plans it runs (a save names the block's hash) and writes a slot's block down to disk just
before a plan overwrites the slot, and the rest when it stops. Blocks the engine found on disk arrive as staged
files (see :class:`~autoglm.runner.kv_tiers.disk_store.DiskBlockStore`), read into their slots in plan order.
"""
from __future__ import annotations

from autoglm.runner.kv_tiers.disk_store import DiskBlockStore


class SlotDisk:
    """What one rank's host slots hold that its disk ``store`` lacks, and the store's files for them."""

    def __init__(self, store: DiskBlockStore, slot_bytes: int) -> None:
        self.store = store
        self.slot_bytes = slot_bytes
        self._unwritten: dict[int, bytes] = {}  # slot -> hash of the block it holds, not yet on disk

    def saved(self, slot: int, block_hash: bytes) -> None:
        """A plan copied the block ``block_hash`` into ``slot``."""
        self._unwritten[slot] = block_hash

    def take_unwritten(self, slot: int) -> bytes | None:
        """The hash of the block in ``slot`` that the disk lacks, which the caller reads out and writes now; None if
        none, or if the disk can no longer be written (then nothing need be read)."""
        block_hash = self._unwritten.pop(slot, None)
        return block_hash if self.store.writable else None

    def unwritten_slots(self) -> list[int]:
        return list(self._unwritten)

    def write(self, block_hash: bytes, payload: bytes) -> None:
        self.store.write(self.store.key(block_hash), payload)

    def staged_payload(self, sequence: int, block_hash: bytes) -> bytes:
        """The bytes of the block the engine staged under ``sequence`` (its file is on disk already)."""
        return self.store.take_staged(self.store.key(block_hash), sequence, self.slot_bytes)
