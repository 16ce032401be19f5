"""Which blocks the host tier's slots hold, least recently used first, and the moves each step carries.

A block the prefix cache evicts takes a host slot (a free one, else the least recently used one's, whose block
each rank writes down to disk first); the runner copies it out before the step's forward pass overwrites the
block. A lookup that misses the pool finds a block in a slot, or finds every rank's file of it on disk (checked
there and then, so that a bad file is a miss, never a restore, and staged for the ranks to read into a slot), and
the runner copies the slot into a fresh block, again before the forward pass. A slot that a step's copies or an
admission's lookup will read or write is pinned until that step's plan is built: no other block takes it
meanwhile.

The host tier is inclusive: a restored block keeps its slot, so evicting it again copies nothing.
"""
from __future__ import annotations

import itertools
import time
from collections import OrderedDict

from autoglm.engine.kv_offload.tier_identity import TierIdentity
from autoglm.engine.kv_offload.tier_stats import TierStats
from autoglm.runner.kv_tiers.disk_store import DiskBlockStore
from autoglm.runner.kv_tiers.host_area import HostBlockArea
from autoglm.step_plan import KVTransfers


class KVOffload:
    """The engine's side of the tiers below the pool (see :class:`~autoglm.engine.sched.block_manager.LowerTiers`)."""

    def __init__(self, area: HostBlockArea, disks: list[DiskBlockStore], identity: TierIdentity,
                 own_rank: int) -> None:
        """``disks``: every rank's block files, in rank order (none: no disk tier); ``own_rank``: the engine's
        process's, whose host tier ``area`` is and whose blocks ``identity`` names."""
        self.area = area
        self.disks = disks
        self.disk = disks[own_rank] if disks else None  # this process's files
        self.identity = identity
        self._slots: OrderedDict[bytes, int] = OrderedDict()  # block hash -> slot, least recently used first
        self._free_slots = list(range(area.num_slots - 1, -1, -1))
        self._pinned: set[int] = set()
        self._saves: list[tuple[int, int, bytes]] = []  # (block, slot, block hash)
        self._disk_reads: list[tuple[int, int, bytes]] = []  # (slot, staged file's sequence, block hash)
        self._restores: list[tuple[int, int]] = []  # (slot, block)
        self._sequences = itertools.count()
        self._read_from_disk: set[bytes] = set()  # read into a slot by a lookup of this step: a disk hit if restored
        self.host_stats = TierStats("host")
        self.disk_stats = TierStats("disk")
        area.on_restore = self.host_stats.restore_latency.observe

    # ---- the block manager's lower tiers --------------------------------------------
    def holds(self, block_hash: bytes) -> bool:
        slot = self._slots.get(block_hash)
        if slot is None:
            slot = self._read_from_disk_into_slot(block_hash)
            if slot is None:
                return False
        self._slots.move_to_end(block_hash)
        self._pinned.add(slot)
        return True

    def evicted(self, block_id: int, block_hash: bytes) -> None:
        if block_hash in self._slots:
            self._slots.move_to_end(block_hash)
            return
        slot = self._claim_slot()
        if slot is None:
            return  # every slot is in use by this step's moves: the block is lost, as without tiers
        self._slots[block_hash] = slot
        self._pinned.add(slot)
        self._saves.append((block_id, slot, block_hash))

    def restore(self, block_hashes: list[bytes], block_ids: list[int], missed_next: bool) -> None:
        for block_hash, block_id in zip(block_hashes, block_ids):
            self._restores.append((self._slots[block_hash], block_id))
            if block_hash in self._read_from_disk:
                self._read_from_disk.discard(block_hash)
                self.host_stats.misses += 1
                self.disk_stats.hits += 1
            else:
                self.host_stats.hits += 1
        if missed_next:
            self.host_stats.misses += 1
            if self.disk is not None:
                self.disk_stats.misses += 1

    # ---- the step --------------------------------------------------------------------
    def take_transfers(self) -> KVTransfers | None:
        """The moves the next plan carries, which unpins every slot; None when there are none."""
        saves, disk_reads, restores = self._saves, self._disk_reads, self._restores
        self._saves, self._disk_reads, self._restores = [], [], []
        self._pinned.clear()
        self._read_from_disk.clear()
        if not saves and not disk_reads and not restores:
            return None
        self.host_stats.bytes_written += len(saves) * self.area.slot_bytes
        self.host_stats.bytes_read += len(restores) * self.area.slot_bytes
        save_blocks, save_slots, save_hashes = _columns(saves, 3)
        read_slots, read_sequences, read_hashes = _columns(disk_reads, 3)
        restore_slots, restore_blocks = _columns(restores, 2)
        return KVTransfers(save_blocks=save_blocks, save_slots=save_slots, save_hashes=save_hashes,
                           disk_read_slots=read_slots, disk_read_sequences=read_sequences,
                           disk_read_hashes=read_hashes, restore_slots=restore_slots, restore_blocks=restore_blocks)

    def close(self) -> None:
        """Once every rank has stopped: remove the staged files no step read."""
        if self.disk is not None:
            self.disk.remove_staging()

    def stats(self) -> list[TierStats]:
        self.host_stats.bytes_stored = len(self._slots) * self.area.slot_bytes
        tiers = [self.host_stats.snapshot()]
        if self.disk is not None:
            disk = self.disk_stats
            disk.bytes_stored, disk.bytes_written = self.disk.bytes_stored, self.disk.bytes_written
            disk.bytes_read = sum(store.bytes_read for store in self.disks)
            disk.blocks_dropped = sum(store.num_dropped for store in self.disks)
            tiers.append(disk.snapshot())
        return tiers

    def check_invariants(self) -> None:
        """Raise AssertionError if a slot is lost, or held twice."""
        held = list(self._slots.values())
        assert len(set(held)) == len(held), "two blocks share a host slot"
        assert sorted(held + self._free_slots) == list(range(self.area.num_slots)), "a host slot is lost"

    # ---- slots -----------------------------------------------------------------------
    def _read_from_disk_into_slot(self, block_hash: bytes) -> int | None:
        """A slot the ranks fill from their files of the block at the next step (each checked and staged now);
        None if some rank's file is missing or bad, or no slot is free."""
        if not self.disks:
            return None
        keys = [disk.key(block_hash) for disk in self.disks]
        if not all(disk.contains(key) for disk, key in zip(self.disks, keys)):
            return None
        slot = self._claim_slot()
        if slot is None:
            return None
        started = time.perf_counter()
        sequence = next(self._sequences)
        staged = []
        for disk, key in zip(self.disks, keys):
            if not disk.stage(key, sequence):
                for done, done_key in staged:
                    done.unstage(done_key, sequence)
                self._free_slots.append(slot)
                return None
            staged.append((disk, key))
        self.disk_stats.restore_latency.observe(time.perf_counter() - started)
        self._slots[block_hash] = slot
        self._disk_reads.append((slot, sequence, block_hash))
        self._read_from_disk.add(block_hash)
        return slot

    def _claim_slot(self) -> int | None:
        """A slot to fill: a free one, else the least recently used unpinned one (whose block each rank writes
        down to disk before the plan replaces it)."""
        if self._free_slots:
            return self._free_slots.pop()
        for block_hash, slot in self._slots.items():
            if slot not in self._pinned:
                del self._slots[block_hash]
                return slot
        return None


def _columns(rows: list[tuple], width: int) -> list[list]:
    """The rows' columns, each a list (``width`` empty ones when there are no rows)."""
    return [list(column) for column in zip(*rows)] if rows else [[] for _ in range(width)]
