"""A KV block's file on disk: a small header that says what the payload is, then the payload.

The header holds a magic, the format version, the block's key, the identity the key was made of (the model's
checksum, dtypes, block size, ranks; as text, so that a person can tell whose block a file is), the payload's
length and its CRC-32. A file is used only when every one of them is what the reader expects: a truncated,
corrupted or foreign file (another model, dtype or rank that somehow carries this name) is refused, never read
as KV.
"""
from __future__ import annotations

import hashlib
import struct
import zlib

MAGIC = b"AGKVBLK\0"
FORMAT_VERSION = 1
KEY_BYTES = 16
_HEADER = struct.Struct(f"<{len(MAGIC)}sHH{KEY_BYTES}sQI")  # magic, version, identity length, key, length, CRC


class BlockFileError(Exception):
    """A block file that must not be used, and why."""


def block_key(identity: bytes, block_hash: bytes) -> bytes:
    """The disk key of the block ``block_hash`` computed by engines of ``identity``: the same on every such engine,
    another on any other."""
    return hashlib.blake2b(identity + block_hash, digest_size=KEY_BYTES, person=b"autoglm-kv-disk").digest()


def block_file_header(key: bytes, identity: bytes, payload: bytes) -> bytes:
    """What precedes ``payload`` in the file of the block keyed ``key``."""
    return _HEADER.pack(MAGIC, FORMAT_VERSION, len(identity), key, len(payload), zlib.crc32(payload)) + identity


def block_file_bytes(identity: bytes, payload_len: int) -> int:
    """The size of a block file whose header carries ``identity``."""
    return _HEADER.size + len(identity) + payload_len


def read_block_payload(data: bytes, key: bytes, identity: bytes, payload_len: int | None) -> bytes:
    """The payload of a whole file's ``data``, checked against what the reader expects (any length the header
    states when ``payload_len`` is None); BlockFileError if not."""
    if len(data) < _HEADER.size:
        raise BlockFileError(f"truncated: {len(data)} bytes, shorter than the {_HEADER.size}-byte header")
    magic, version, identity_len, file_key, length, crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise BlockFileError("not a KV block file (wrong magic)")
    if version != FORMAT_VERSION:
        raise BlockFileError(f"format version {version}; this engine reads version {FORMAT_VERSION}")
    file_identity = data[_HEADER.size : _HEADER.size + identity_len]
    if file_key != key or file_identity != identity:
        raise BlockFileError(f"foreign block: written for {file_identity.decode(errors='replace')!r}")
    if payload_len is not None and length != payload_len:
        raise BlockFileError(f"payload of {length} bytes; a block here has {payload_len}")
    payload = data[_HEADER.size + identity_len :]
    if len(payload) != length:
        raise BlockFileError(f"truncated: {len(payload)} of {length} payload bytes")
    if zlib.crc32(payload) != crc:
        raise BlockFileError("corrupted: the payload's CRC-32 does not match")
    return payload
