"""Consistent hashing: stable across processes, balanced, and moving few keys when members change."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter

import pytest

from autoglm.server.ray_serve.hash_ring import HashRing

KEYS = [f"prompt prefix {index}" for index in range(3000)]


def owners(ring: HashRing) -> dict[str, str]:
    return {key: ring.owner(key) for key in KEYS}


def test_every_process_maps_a_key_to_the_same_member():
    """Python's own hash() is salted per process; two ingress replicas must agree."""
    script = ("from autoglm.server.ray_serve.hash_ring import HashRing; "
              "print(HashRing.of(['a', 'b', 'c']).owner('the key'))")
    answers = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
               for _ in range(2)}
    assert answers == {HashRing.of(["c", "b", "a"]).owner("the key") + "\n"}


def test_keys_spread_evenly_over_the_members():
    shares = Counter(owners(HashRing.of(["a", "b", "c"])).values())
    assert set(shares) == {"a", "b", "c"}
    assert all(count > len(KEYS) / 3 * 0.75 for count in shares.values())


def test_a_member_joining_takes_keys_only_for_itself():
    before = owners(HashRing.of(["a", "b"]))
    after = owners(HashRing.of(["a", "b", "c"]))
    moved = [key for key in KEYS if before[key] != after[key]]
    assert all(after[key] == "c" for key in moved)
    assert len(moved) < len(KEYS) / 2


def test_a_member_leaving_gives_away_only_its_own_keys():
    before = owners(HashRing.of(["a", "b", "c"]))
    after = owners(HashRing.of(["a", "b"]))
    assert all(before[key] == "c" for key in KEYS if before[key] != after[key])


def test_an_empty_ring_owns_nothing():
    with pytest.raises(ValueError, match="without members"):
        HashRing.of([]).owner("key")
