"""Consistent hashing: each key goes to one member, and a member joining or leaving moves few keys.

Members sit at many points on a ring of 64-bit hashes; a key belongs to the member at the first
point at or after its own hash. Hashes are blake2b, not Python's hash(), so every process (each
ingress replica) maps a key to the same member.
"""
from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

# Points per member: enough that members' shares of the keys differ by a few percent.
POINTS_PER_MEMBER = 128


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


@dataclass(frozen=True)
class HashRing:
    members: frozenset[str]
    points: tuple[int, ...]  # sorted
    owners: tuple[str, ...]  # the member at each point

    @classmethod
    def of(cls, members: Iterable[str], points_per_member: int = POINTS_PER_MEMBER) -> HashRing:
        unique = frozenset(members)
        ring = sorted((_hash(f"{member}#{index}"), member) for member in unique for index in range(points_per_member))
        return cls(unique, tuple(point for point, _ in ring), tuple(member for _, member in ring))

    def owner(self, key: str) -> str:
        """The member `key` belongs to; the ring must have one."""
        if not self.points:
            raise ValueError("a hash ring without members owns no key")
        index = bisect.bisect_left(self.points, _hash(key))
        return self.owners[index % len(self.owners)]
