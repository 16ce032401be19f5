"""Closing JSON text that was cut off: a streamed call whose model stopped mid-arguments is closed as it was sent."""
from __future__ import annotations

from autoglm.server.tool_calls.json_scan import scan_json


def json_closing(prefix: str) -> str:
    """What to append to `prefix`, the start of a JSON object, to close it: the open string, then each
    open array and object. A value the prefix stops before (after a ':' or ',') becomes null; anything
    else cut mid-way (a key, a number, a literal) is closed as it stands, which a client may still fail
    to parse."""
    scan = scan_json(prefix, 0)
    if scan.end is not None or scan.escaped:
        return ""  # closed already; or a lone backslash, which no closing makes valid text
    closing = ""
    if scan.in_string:
        closing = '"'
    elif prefix.rstrip().endswith(":"):
        closing = "null"
    elif prefix.rstrip().endswith(","):
        closing = '"": null' if scan.awaited[-1] == "}" else "null"
    return closing + "".join(reversed(scan.awaited))
