"""A bound on how deeply a request body nests arrays and objects, checked on its bytes before it is parsed.

Python's JSON parser gives up with a RecursionError near a thousand levels, wherever the stack
happens to stand, and FastAPI then answers a generic "There was an error parsing the body"; well
before that, pydantic refuses to serialize a value nested past about 260 levels (a 500 when the
server dumps a tool for its chat template), and the schema rewriting before a grammar compiles
recurses too. A stated limit just under pydantic's, far above any real request, is refused with a
400 saying so instead, before anything parses the body.

The scan runs in the regex engine and itertools, not in a Python loop per character, so that even
a body of a million brackets costs the event loop about what parsing it would.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from http import HTTPStatus
from itertools import accumulate

from autoglm.server.openai.errors import APIError

# Arrays and objects inside one another, the body's own object the first level; under pydantic's
# serialization depth, so that any value a request may hold can be dumped again.
MAX_JSON_DEPTH = 256
# A JSON string; an unterminated one runs to the end, so that no quote starts a second scan.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
# Everything but brackets and the one '"' left in place of each string.
_NOT_STRUCTURE = re.compile(r'[^\[\]{}"]+')
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1, '"': 0}
# A top-level key named as the error's param: a field name, never arbitrary text from the body.
_FIELD_NAME = re.compile(r'"([A-Za-z0-9_]{1,64})"')


def nesting_error(body: bytes) -> APIError | None:
    """The 400 for a body that nests deeper than MAX_JSON_DEPTH, naming the top-level field the
    nesting is under; None for any other body, valid JSON or not (the parser judges that)."""
    # Each bracket holds one of these bytes in UTF-8, -16 and -32 alike: with too few of them the
    # body cannot nest too deep, which settles every ordinary request without decoding it.
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return None
    try:
        text = body.decode(json.detect_encoding(body), "surrogatepass")  # as json.loads decodes bytes
    except UnicodeDecodeError:
        return None
    skeleton = _NOT_STRUCTURE.sub("", _STRING.sub('"', text))
    if max(_depths(skeleton), default=0) <= MAX_JSON_DEPTH:
        return None
    depths = list(_depths(skeleton))
    # Depth moves one step at a time, so it first passes the limit at exactly one more.
    return _too_deep(_top_level_key(text, skeleton, depths, depths.index(MAX_JSON_DEPTH + 1)))


def _depths(skeleton: str) -> Iterator[int]:
    """The nesting depth after each character of `skeleton`."""
    return accumulate(map(_DEPTH_STEP.__getitem__, skeleton))


def _top_level_key(text: str, skeleton: str, depths: list[int], position: int) -> str | None:
    """The key of the body's member that holds skeleton `position`, when the body is an object and
    the key a field name. Within the object, that member's value opens right after its key: the
    last place before `position` at the object's own depth."""
    if not skeleton.startswith("{"):
        return None
    key_at = position - 1 - depths[position - 1::-1].index(1)
    if skeleton[key_at] != '"':
        return None
    key = _STRING.findall(text)[skeleton.count('"', 0, key_at)]
    name = _FIELD_NAME.fullmatch(key)
    return name.group(1) if name is not None else None


def _too_deep(field: str | None) -> APIError:
    where = f" (in {field!r})" if field is not None else ""
    return APIError(HTTPStatus.BAD_REQUEST,
                    f"the request body nests arrays and objects more than {MAX_JSON_DEPTH} levels deep{where}; "
                    f"this server takes at most {MAX_JSON_DEPTH} levels, the body's own object the first",
                    param=field, code="request_too_deep")
