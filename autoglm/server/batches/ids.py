"""OpenAI's forms of ids: ``file-...``, ``batch_...``, and ``batch_req_...`` for each line's result."""
from __future__ import annotations

import hashlib
import uuid


def new_file_id() -> str:
    return f"file-{uuid.uuid4().hex[:24]}"


def new_batch_id() -> str:
    return f"batch_{uuid.uuid4().hex}"


def new_line_result_id() -> str:
    return f"batch_req_{uuid.uuid4().hex}"


def result_file_id(batch_id: str, kind: str) -> str:
    """The id of a batch's output or error file (`kind`), the same each time it is asked: a finalisation cut
    short by a crash writes the same file again when it is done over, leaving nothing behind."""
    return f"file-{hashlib.sha256(f'{batch_id}/{kind}'.encode()).hexdigest()[:24]}"
