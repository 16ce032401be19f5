"""A block file is read back only when its header says exactly what the reader expects."""
from __future__ import annotations

import struct

import pytest

from autoglm.runner.kv_tiers.block_file import BlockFileError, block_file_header, read_block_payload

KEY, IDENTITY, PAYLOAD = b"k" * 16, b'{"dtype":"float32"}', bytes(range(200))


def whole_file() -> bytes:
    return block_file_header(KEY, IDENTITY, PAYLOAD) + PAYLOAD


def test_a_whole_file_gives_its_payload_back():
    assert read_block_payload(whole_file(), KEY, IDENTITY, len(PAYLOAD)) == PAYLOAD


@pytest.mark.parametrize(("data", "reason"), [
    (whole_file()[:10], "truncated: 10 bytes, shorter than"),
    (b"NOTABLOCK" + whole_file()[9:], "wrong magic"),
    (whole_file()[:8] + struct.pack("<H", 99) + whole_file()[10:], "format version 99"),
    (block_file_header(b"x" * 16, IDENTITY, PAYLOAD) + PAYLOAD, "foreign block"),
    (block_file_header(KEY, b'{"dtype":"bfloat16"}', PAYLOAD) + PAYLOAD, "foreign block"),
    (block_file_header(KEY, IDENTITY, PAYLOAD[:-1]) + PAYLOAD[:-1], "payload of 199 bytes; a block here has 200"),
    (whole_file()[:-1], "truncated: 199 of 200 payload bytes"),
    (whole_file()[:-1] + b"\xff", "corrupted"),
])
def test_a_file_that_is_not_what_the_reader_expects_is_refused_saying_why(data, reason):
    with pytest.raises(BlockFileError, match=reason):
        read_block_payload(data, KEY, IDENTITY, len(PAYLOAD))
