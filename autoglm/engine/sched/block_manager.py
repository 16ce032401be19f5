"""KV cache blocks: allocation, reference counts, and the prefix cache.

Invariant: every block is free (refcount 0, in ``_free``), or referenced by live
sequences (refcount > 0, not in ``_free``). A free block may still hold a cached prefix
(it has a hash in ``_cached``) and is reused, least recently freed first, only when the
pool needs room. Only full blocks are ever hashed.

A block's hash mixes in the manager's ``cache_salt`` and its sequence's own (a tenant's, see
:func:`salt_bytes`): sequences see each other's cached prefixes only under the same salt. A block
that holds image placeholders also mixes in those images' content hashes and offsets: the same
image hits, another image of the same size (the same placeholder tokens) misses. A sequence that runs with a
LoRA adapter mixes in the adapter's content digest: no block is shared between adapters, or with the base model.

With ``lower_tiers`` (see :mod:`autoglm.engine.kv_offload`), an evicted cached block is handed to them before
its block is reused, and a prefix lookup that misses the pool goes on in them: a block they hold is restored into
a fresh block when the sequence is allocated, and counts as cached.
"""
from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from typing import Protocol

from autoglm.engine.sequence import Sequence


def hash_block(parent_hash: bytes, token_ids: list[int], salt: bytes, images: bytes = b"",
               adapter: bytes = b"") -> bytes:
    """A full block's identity: its parent's hash (so the whole prefix), its tokens, the salt, the
    digest of the images whose placeholders it holds (empty for text), and that of the LoRA adapter
    that computed it (empty for the base model)."""
    digest = hashlib.blake2b(parent_hash, digest_size=16)
    digest.update(salt)
    digest.update(array("q", token_ids).tobytes())
    digest.update(images)
    if adapter:
        digest.update(b"\0lora" + adapter)
    return digest.digest()


def salt_bytes(salt: str) -> bytes:
    """A sequence's cache salt as its block hashes take it: a digest of fixed length, so that no
    salt reads as the start of another salt or of a parent hash."""
    return hashlib.blake2b(salt.encode(), digest_size=16, person=b"autoglm-salt").digest()


class LowerTiers(Protocol):
    """Where the prefix cache's evicted blocks go, and come back from."""

    def holds(self, block_hash: bytes) -> bool:
        """Whether the block can be restored if the sequence looking it up is allocated in this step."""

    def evicted(self, block_id: int, block_hash: bytes) -> None:
        """The pool is about to reuse ``block_id``, which holds ``block_hash``: keep its contents if there is room."""

    def restore(self, block_hashes: list[bytes], block_ids: list[int], missed_next: bool) -> None:
        """Bring back each of ``block_hashes`` into the fresh block beside it; ``missed_next``: the lookup went
        on past them and no tier held the next block."""


class BlockManager:
    """Owns the fixed pool of KV blocks and each sequence's block table.

    With ``reserve_tokens_per_seq`` set (the contiguous, non-paged layout) a sequence takes
    a whole region of consecutive blocks large enough for a full context on first
    allocation, as a classic contiguous KV cache does; prefix caching is then off.
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        enable_prefix_caching: bool = True,
        reserve_tokens_per_seq: int | None = None,
        cache_salt: bytes = b"",
        lower_tiers: LowerTiers | None = None,
    ) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.cache_salt = cache_salt
        self.lower_tiers = lower_tiers
        self.enable_prefix_caching = enable_prefix_caching and reserve_tokens_per_seq is None
        self._ref_counts = [0] * num_blocks
        self._block_hash: list[bytes | None] = [None] * num_blocks
        self._cached: dict[bytes, int] = {}
        # Free blocks in reuse order: blocks without a cached prefix first, then cached ones
        # from least to most recently freed.
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._region_blocks = (
            None if reserve_tokens_per_seq is None else self.blocks_for(reserve_tokens_per_seq)
        )
        self.prefix_cache_queries = 0  # prompt tokens looked up
        self.prefix_cache_hits = 0  # of which served from the cache

    # ---- capacity -------------------------------------------------------------------
    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def usage(self) -> float:
        """Fraction of blocks referenced by live sequences."""
        return 1.0 - self.num_free_blocks / self.num_blocks

    def max_blocks_per_seq(self, num_tokens: int) -> int:
        """Blocks a sequence of ``num_tokens`` tokens holds at most in this layout."""
        return self._region_blocks if self._region_blocks is not None else self.blocks_for(num_tokens)

    # ---- prefix cache ---------------------------------------------------------------
    def _update_hashes(self, seq: Sequence, num_tokens: int) -> None:
        """Extend ``seq.block_hashes`` to every full block within its first ``num_tokens``."""
        size = self.block_size
        salt = self.cache_salt + seq.cache_salt
        for index in range(len(seq.block_hashes), num_tokens // size):
            parent = seq.block_hashes[-1] if seq.block_hashes else b""
            tokens = seq.token_ids[index * size : (index + 1) * size]
            images = b"" if seq.vision is None else seq.vision.block_digest(index * size, (index + 1) * size)
            seq.block_hashes.append(hash_block(parent, tokens, salt, images, seq.adapter_digest))

    def find_cached_prefix(self, seq: Sequence) -> list[int | None]:
        """Leading blocks of ``seq`` whose K/V already exist; at least one token is left to compute. None stands
        for a block a lower tier holds, restored into a fresh block by :meth:`allocate`.

        They come from the prefix cache or, for an n > 1 completion, from the prompt blocks of
        the completion that read the prompt, whichever covers more (prefix caching may be off).
        None while ``seq`` still has prompt positions to score, or pools every position: those must be computed.
        """
        if self._region_blocks is not None or seq.needs_prompt_logprobs or seq.pools_every_position:
            return []
        hits = self._cache_hits(seq) if self.enable_prefix_caching else []
        parent = seq.parent
        if parent is not None:
            num_shared = min(parent.num_computed_tokens, seq.num_prompt_tokens - 1) // self.block_size
            if num_shared > len(hits):
                hits = parent.block_table[:num_shared]  # empty once the parent is preempted or done
        return hits

    def _cache_hits(self, seq: Sequence) -> list[int | None]:
        self._update_hashes(seq, seq.num_tokens - 1)
        hits: list[int | None] = []
        for block_hash in seq.block_hashes:
            block_id = self._cached.get(block_hash)
            if block_id is None and not (self.lower_tiers is not None and self.lower_tiers.holds(block_hash)):
                break
            hits.append(block_id)
        return hits

    def record_prefix_lookup(self, num_tokens: int, num_hit_blocks: int) -> None:
        """Count one admitted lookup (in tokens), for the hit-rate metrics."""
        self.prefix_cache_queries += num_tokens
        self.prefix_cache_hits += num_hit_blocks * self.block_size

    def cache_full_blocks(self, seq: Sequence) -> None:
        """Publish the blocks of ``seq`` that are now full and computed."""
        if not self.enable_prefix_caching:
            return
        num_full = seq.num_computed_tokens // self.block_size
        self._update_hashes(seq, seq.num_computed_tokens)
        for index in range(seq.num_published_blocks, num_full):
            block_id = seq.block_table[index]
            if self._block_hash[block_id] is None:
                block_hash = seq.block_hashes[index]
                self._block_hash[block_id] = block_hash
                self._cached.setdefault(block_hash, block_id)
        seq.num_published_blocks = max(seq.num_published_blocks, num_full)

    # ---- allocation -----------------------------------------------------------------
    def allocate(self, seq: Sequence, num_new_tokens: int, cached_blocks: list[int | None] = ()) -> bool:
        """Make room for ``num_new_tokens`` more tokens of ``seq``; False (and no change) if full.

        ``cached_blocks`` (from :meth:`find_cached_prefix`, for a sequence with no blocks yet)
        become the head of its block table and count as computed; each None among them takes a fresh
        block that a lower tier restores, published to the prefix cache at once.
        """
        if self._region_blocks is not None:
            return bool(seq.block_table) or self._allocate_region(seq)
        num_computed = seq.num_computed_tokens + len(cached_blocks) * self.block_size
        num_restored = sum(1 for block_id in cached_blocks if block_id is None)
        needed = self.blocks_for(num_computed + num_new_tokens) - len(seq.block_table) - len(cached_blocks)
        num_reused_free = sum(1 for block_id in cached_blocks
                              if block_id is not None and self._ref_counts[block_id] == 0)
        if needed + num_restored + num_reused_free > self.num_free_blocks:
            return False
        for block_id in cached_blocks:
            if block_id is not None:
                self._take(block_id)
        admitted = not seq.block_table
        restores = admitted and self.lower_tiers is not None
        seq.block_table.extend(self._restored(seq, cached_blocks) if restores else cached_blocks)
        if cached_blocks:
            seq.num_computed_tokens = num_computed
        for _ in range(needed):
            seq.block_table.append(self._take_fresh())
        return True

    def _restored(self, seq: Sequence, cached_blocks: list[int | None]) -> list[int]:
        """``cached_blocks`` with a fresh block, published and restored by the lower tiers, in place of each None."""
        blocks: list[int] = []
        restored_hashes: list[bytes] = []
        restored_blocks: list[int] = []
        for index, block_id in enumerate(cached_blocks):
            if block_id is None:
                block_id = self._take_fresh()
                block_hash = seq.block_hashes[index]
                self._block_hash[block_id] = block_hash
                self._cached.setdefault(block_hash, block_id)
                restored_hashes.append(block_hash)
                restored_blocks.append(block_id)
            blocks.append(block_id)
        # The lookup went on into the tiers past the hits, unless the hits are the parent's or were never looked up.
        looked_up = seq.parent is None and not seq.needs_prompt_logprobs
        missed_next = looked_up and len(seq.block_hashes) > len(cached_blocks)
        if restored_blocks or missed_next:
            self.lower_tiers.restore(restored_hashes, restored_blocks, missed_next)
        return blocks

    def _allocate_region(self, seq: Sequence) -> bool:
        """Reserve a run of consecutive free blocks for the whole context of ``seq``."""
        size = self._region_blocks
        for start in range(0, self.num_blocks - size + 1, size):
            region = range(start, start + size)
            if all(self._ref_counts[block_id] == 0 for block_id in region):
                seq.block_table = [self._take(block_id) for block_id in region]
                return True
        return False

    def free(self, seq: Sequence) -> None:
        """Drop the references of ``seq``; its cached blocks stay reusable until evicted."""
        for block_id in reversed(seq.block_table):
            self._release(block_id)
        seq.block_table = []
        seq.num_published_blocks = 0

    def _release(self, block_id: int) -> None:
        """Drop one reference; a block left unreferenced is free, reused first unless it holds a cached prefix."""
        self._ref_counts[block_id] -= 1
        if self._ref_counts[block_id] == 0:
            self._free[block_id] = None
            if self._block_hash[block_id] is None:
                self._free.move_to_end(block_id, last=False)

    def release_lookahead(self, seq: Sequence) -> None:
        """Give back the blocks past ``seq``'s computed tokens: speculative slots whose proposals were
        rejected. They were never full of computed tokens, so they were never published to the prefix cache."""
        if self._region_blocks is not None:
            return
        keep = self.blocks_for(seq.num_computed_tokens)
        for block_id in seq.block_table[keep:]:
            self._release(block_id)
        del seq.block_table[keep:]

    def _take_fresh(self) -> int:
        """The next free block, its cached prefix (if any) evicted."""
        block_id, _ = self._free.popitem(last=False)
        block_hash = self._block_hash[block_id]
        if block_hash is not None:
            if self.lower_tiers is not None:
                self.lower_tiers.evicted(block_id, block_hash)
            self._block_hash[block_id] = None
            if self._cached.get(block_hash) == block_id:
                del self._cached[block_hash]
        self._ref_counts[block_id] = 1
        return block_id

    def _take(self, block_id: int) -> int:
        if self._ref_counts[block_id] == 0:
            del self._free[block_id]
        self._ref_counts[block_id] += 1
        return block_id

    # ---- checks ---------------------------------------------------------------------
    def num_referenced_blocks(self) -> int:
        return sum(1 for count in self._ref_counts if count > 0)

    def check_invariants(self) -> None:
        """Raise AssertionError if the pool's bookkeeping is inconsistent."""
        for block_id, count in enumerate(self._ref_counts):
            assert count >= 0, f"block {block_id} has refcount {count}"
            assert (count == 0) == (block_id in self._free), f"block {block_id}: refcount {count} vs free list"
        for block_hash, block_id in self._cached.items():
            assert self._block_hash[block_id] == block_hash, f"cached block {block_id} lost its hash"
