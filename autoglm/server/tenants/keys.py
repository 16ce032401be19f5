"""API keys: made at random, stored only as SHA-256 hashes, looked up without leaking timing."""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

KEY_PREFIX = "agk-"
# 32 random bytes: as hard to guess as a 256-bit secret, so one unsalted SHA-256 is enough to store it.
KEY_BYTES = 32
HASH_PREFIX = "sha256:"


def generate_key() -> str:
    """A new key: 'agk-' and 43 base64url characters, shown once and never stored."""
    return KEY_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).decode("ascii").rstrip("=")


def generate_key_id() -> str:
    """A short public name for a key, to list and revoke it by; it reveals nothing of the key. It starts
    with a letter: eight hex digits alone may read as a number in YAML (``12345678``, ``1e100000``)."""
    return "k-" + secrets.token_hex(4)


def hash_key(key: str) -> str:
    return HASH_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()


def hashes_match(presented_hash: str, stored_hash: str) -> bool:
    """Equal hashes, compared in a time that does not depend on where they first differ."""
    return hmac.compare_digest(presented_hash.encode("ascii"), stored_hash.encode("ascii"))
