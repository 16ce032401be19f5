"""The host tier's slots hold a block's bytes exactly, scales included, whatever the KV format stores; a slot's
block goes down to disk before a plan replaces it, and comes back from a staged file into another slot."""
from __future__ import annotations

import errno
import os

import pytest
import torch

from autoglm.attention.kv_cache_format import AUTO, FP8_E4M3, INT8, SCALE_DTYPE, KVCacheFormat
from autoglm.runner.kv_cache import KVPool
from autoglm.runner.kv_tiers import host_area
from autoglm.runner.kv_tiers.disk_store import DiskBlockStore
from autoglm.runner.kv_tiers.host_area import HostBlockArea
from autoglm.runner.kv_tiers.slot_disk import SlotDisk
from autoglm.step_plan import KVTransfers

LAYERS, HEADS, HEAD_DIM, BLOCKS, BLOCK_SIZE = 3, 2, 8, 5, 4


def random_pool(kv_format: KVCacheFormat, dtype: torch.dtype) -> KVPool:
    generator = torch.Generator().manual_seed(0)
    slots = BLOCKS * BLOCK_SIZE
    values = torch.randn(LAYERS, 2, slots, HEADS, HEAD_DIM, generator=generator)
    values = (values * 50).to(torch.int8) if kv_format is INT8 else values.to(kv_format.storage(dtype))
    scales = torch.rand(LAYERS, 2, slots, HEADS, generator=generator, dtype=SCALE_DTYPE) if kv_format.scaled else None
    return KVPool(values, scales, kv_format, BLOCKS, BLOCK_SIZE)


def block(pool: KVPool, index: int) -> list[torch.Tensor]:
    span = slice(index * BLOCK_SIZE, (index + 1) * BLOCK_SIZE)
    parts = [pool.values[:, :, span].view(torch.uint8)]
    return parts + ([] if pool.scales is None else [pool.scales[:, :, span]])


@pytest.mark.parametrize(("kv_format", "dtype"), [(AUTO, torch.float32), (AUTO, torch.bfloat16), (INT8, torch.float32),
                                                  (FP8_E4M3, torch.float32)])
def test_a_block_saved_to_a_slot_and_restored_into_another_block_is_the_same_bytes(kv_format, dtype):
    pool = random_pool(kv_format, dtype)
    area = HostBlockArea(pool, num_slots=3)
    saved = [part.clone() for part in block(pool, 1)]
    area.apply(KVTransfers(save_blocks=[1], save_slots=[2], save_hashes=[b"one"]))
    payload = area.read_slot(2)
    assert len(payload) == area.slot_bytes
    area.write_slot(0, payload)  # as a disk read fills a slot
    area.apply(KVTransfers(restore_slots=[0, 2], restore_blocks=[3, 4]))
    for target in (3, 4):
        assert all(torch.equal(got, want) for got, want in zip(block(pool, target), saved))


def test_a_block_saved_and_restored_over_in_one_step_is_read_before_it_is_written():
    pool = random_pool(AUTO, torch.float32)
    area = HostBlockArea(pool, num_slots=2)
    first, second = (block(pool, index)[0].clone() for index in (0, 1))
    area.apply(KVTransfers(save_blocks=[1], save_slots=[1], save_hashes=[b"one"]))
    area.apply(KVTransfers(save_blocks=[0], save_slots=[0], save_hashes=[b"zero"], restore_slots=[1],
                           restore_blocks=[0]))
    assert torch.equal(block(pool, 0)[0], second)
    assert torch.equal(area.values[0], first)


def test_a_slot_block_goes_to_disk_before_it_is_replaced_and_returns_from_its_staged_file(tmp_path):
    pool = random_pool(INT8, torch.float32)
    area = HostBlockArea(pool, num_slots=2)
    store = DiskBlockStore(tmp_path, capacity_bytes=1 << 20, identity=b"rank 0", staging=".staging-test")
    area.disk = SlotDisk(store, area.slot_bytes)
    first = [part.clone() for part in block(pool, 1)]
    area.apply(KVTransfers(save_blocks=[1], save_slots=[0], save_hashes=[b"first"]))
    assert not store.contains(store.key(b"first"))  # still only in its slot
    area.apply(KVTransfers(save_blocks=[2], save_slots=[0], save_hashes=[b"second"]))
    assert store.contains(store.key(b"first")) and not store.contains(store.key(b"second"))
    assert store.stage(store.key(b"first"), sequence=7)
    area.apply(KVTransfers(disk_read_slots=[1], disk_read_sequences=[7], disk_read_hashes=[b"first"],
                           restore_slots=[1], restore_blocks=[4]))
    assert all(torch.equal(got, want) for got, want in zip(block(pool, 4), first))
    assert list(store.staging.iterdir()) == []  # the staged file was read once and released
    area.persist()
    assert store.contains(store.key(b"second"))


def test_a_payload_of_another_size_is_refused():
    area = HostBlockArea(random_pool(AUTO, torch.float32), num_slots=1)
    with pytest.raises(ValueError, match=f"a slot holds {area.slot_bytes} bytes"):
        area.write_slot(0, b"\0" * (area.slot_bytes - 1))


def test_a_mapped_file_the_temporary_folder_cannot_hold_is_refused_at_start(monkeypatch):
    def no_space(handle, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(host_area.os, "posix_fallocate", no_space)
    with pytest.raises(ValueError, match="kv_offload_bytes: cannot reserve .* lower kv_offload_bytes"):
        HostBlockArea(random_pool(AUTO, torch.float32), num_slots=2)


def test_writers_list_the_folder_once_per_64th_of_the_cap_and_four_of_them_keep_it(tmp_path, monkeypatch):
    """A listing per write grew with the folder; four stores writing in turn never pass the cap between them."""
    block = 1000
    cap = 200 * (block + 200)  # about 200 files with their headers
    stores = [DiskBlockStore(tmp_path, capacity_bytes=cap, identity=f"rank {index}".encode(),
                             staging=f".staging-{index}") for index in range(4)]
    listings = []
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path: listings.append(path) or real_listdir(path))
    for number in range(600):
        store = stores[number % 4]
        store.write(store.key(number.to_bytes(4, "little")), bytes([number % 251]) * block)
        held = sum(path.stat().st_size for path in tmp_path.glob("*.kvblock"))
        assert held <= cap, f"after write {number}: {held} bytes held, the cap is {cap}"
    # Each store lists after a 64th of the cap (about 3 of its writes): 600 writes, about 200 listings, not 600.
    assert len(listings) <= 600 // 3 + 4
    assert sum(path.stat().st_size for path in tmp_path.glob("*.kvblock")) > 0.5 * cap
