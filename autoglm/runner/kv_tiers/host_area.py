"""The second KV tier: slots of host memory, each holding one pool block's K, V and scales across every layer.

On an accelerator the area is pinned host memory, so copies to and from the device run without staging and
without making the host wait. On the CPU, where the pool itself is host memory, it is a memory-mapped file of
its own in the temporary folder (``TMPDIR``; its space reserved at start, the file unlinked once mapped so that
nothing is left behind): the kernel may write its pages back and drop them under memory pressure rather than the
pool's.

Copies are queued on the device's current stream, behind and before the step's forward pass, so their order
against the pool's writes is the stream's; on CUDA an event marks the last of them, and any read or write of
a slot by the host waits for it first (:meth:`HostBlockArea.synchronize`).
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from autoglm.attention.kv_cache_format import SCALE_DTYPE
from autoglm.runner.kv_cache import KVPool
from autoglm.runner.kv_tiers.slot_disk import SlotDisk
from autoglm.step_plan import KVTransfers

_SCALES_ALIGNMENT = 64  # bytes: the scales' part of the area starts aligned for any dtype


class HostBlockArea:
    """``num_slots`` slots, each the bytes of one block of ``pool``: values then scales (scaled formats only)."""

    def __init__(self, pool: KVPool, num_slots: int) -> None:
        if num_slots < 1:
            raise ValueError(f"a host KV area needs at least one slot, got {num_slots}")
        self.num_slots = num_slots
        self.device = pool.values.device
        # Receives the host time of each step's copies back into the pool (the engine's restore latency).
        self.on_restore: Callable[[float], None] = lambda seconds: None
        layers, _, _, heads, head_dim = pool.values.shape
        self._pool_values = _as_bytes(pool.values).view(layers, 2, pool.num_blocks, pool.block_size, heads, -1)
        self._pool_scales = None if pool.scales is None else pool.scales.view(layers, 2, pool.num_blocks,
                                                                             pool.block_size, heads)
        values_shape = self._pool_values[:, :, 0].shape
        values_bytes = num_slots * self._pool_values[:, :, 0].numel()
        scales_start = -(-values_bytes // _SCALES_ALIGNMENT) * _SCALES_ALIGNMENT
        scales_count = 0 if self._pool_scales is None else self._pool_scales[:, :, 0].numel()
        self._buffer = _host_buffer(scales_start + num_slots * scales_count * SCALE_DTYPE.itemsize, self.device)
        self.values = self._buffer[:values_bytes].view(num_slots, *values_shape)
        self.scales = None if self._pool_scales is None else (
            self._buffer[scales_start:].view(SCALE_DTYPE).view(num_slots, *self._pool_scales[:, :, 0].shape))
        scale_bytes = 0 if self.scales is None else self.scales[0].numel() * SCALE_DTYPE.itemsize
        self.slot_bytes = self.values[0].numel() + scale_bytes
        self._copied: torch.cuda.Event | None = None
        self.disk: SlotDisk | None = None  # this rank's disk tier, if any (kv_disk_path)

    @property
    def num_bytes(self) -> int:
        return int(self._buffer.numel())

    def apply(self, transfers: KVTransfers) -> None:
        """Copy the plan's saved blocks out to their slots, read its staged disk blocks into theirs, then copy its
        restored slots into their blocks: a block saved and then reused as a restore's target in one plan is read
        before it is written. A slot's block the disk lacks is written down before anything replaces it."""
        started = time.perf_counter()
        for block, slot, block_hash in zip(transfers.save_blocks, transfers.save_slots, transfers.save_hashes):
            self._write_down(slot)
            self._copy(slot, block, to_host=True)
            if self.disk is not None:
                self.disk.saved(slot, block_hash)
        for slot, sequence, block_hash in zip(transfers.disk_read_slots, transfers.disk_read_sequences,
                                              transfers.disk_read_hashes):
            assert self.disk is not None, "the plan reads a block from disk, but this rank has no disk tier"
            self._write_down(slot)
            self.write_slot(slot, self.disk.staged_payload(sequence, block_hash))
        for slot, block in zip(transfers.restore_slots, transfers.restore_blocks):
            self._copy(slot, block, to_host=False)
        if self.device.type == "cuda" and (transfers.save_blocks or transfers.restore_blocks):
            self._copied = torch.cuda.Event()
            self._copied.record()
        if transfers.restore_blocks:
            self.on_restore(time.perf_counter() - started)

    def persist(self) -> None:
        """Write every slot's block the disk tier lacks down to it, for the engines that start after this one."""
        if self.disk is not None:
            for slot in self.disk.unwritten_slots():
                self._write_down(slot)

    def _write_down(self, slot: int) -> None:
        if self.disk is not None and (block_hash := self.disk.take_unwritten(slot)) is not None:
            self.disk.write(block_hash, self.read_slot(slot))

    def _copy(self, slot: int, block: int, to_host: bool) -> None:
        pairs = [(self.values[slot], self._pool_values[:, :, block])]
        if self.scales is not None:
            pairs.append((self.scales[slot], self._pool_scales[:, :, block]))
        for host, pooled in pairs:
            target, source = (host, pooled) if to_host else (pooled, host)
            target.copy_(source, non_blocking=True)

    def synchronize(self) -> None:
        """Wait until the queued copies have run, before the host reads or writes a slot."""
        if self._copied is not None:
            self._copied.synchronize()
            self._copied = None

    def read_slot(self, slot: int) -> bytes:
        """The slot's bytes, as a block file's payload holds them."""
        self.synchronize()
        parts = [self.values[slot]] + ([] if self.scales is None else [self.scales[slot].view(torch.uint8)])
        return b"".join(part.reshape(-1).numpy().tobytes() for part in parts)

    def write_slot(self, slot: int, payload: bytes) -> None:
        """Fill the slot from a payload :meth:`read_slot` gave (of this layout; its length is checked)."""
        if len(payload) != self.slot_bytes:
            raise ValueError(f"a slot holds {self.slot_bytes} bytes, the payload has {len(payload)}")
        self.synchronize()
        data = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
        values_bytes = self.values[slot].numel()
        self.values[slot].reshape(-1).copy_(data[:values_bytes])
        if self.scales is not None:
            self.scales[slot].view(torch.uint8).reshape(-1).copy_(data[values_bytes:])


def _as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    """The pool's values as raw bytes, one more dimension for the element's bytes: copies then never convert."""
    return tensor.view(torch.uint8).view(*tensor.shape[:-1], -1)


def _host_buffer(num_bytes: int, device: torch.device) -> torch.Tensor:
    """Zeroed host bytes: pinned beside an accelerator, a mapped file of their own on the CPU."""
    if device.type != "cpu":
        return torch.zeros(num_bytes, dtype=torch.uint8, pin_memory=device.type == "cuda")
    handle, path = tempfile.mkstemp(prefix="autoglm-kv-area-")
    try:
        # Reserved now: a mapped page the file system cannot hold would end the process at its first write.
        os.posix_fallocate(handle, 0, num_bytes)
        return torch.from_file(path, shared=True, size=num_bytes, dtype=torch.uint8)
    except OSError as error:
        raise ValueError(f"kv_offload_bytes: cannot reserve {num_bytes} bytes for the host tier's mapped file in "
                         f"{Path(path).parent} ({error.strerror}); free space there, point TMPDIR elsewhere or lower "
                         "kv_offload_bytes") from None
    finally:
        os.close(handle)
        os.unlink(path)
