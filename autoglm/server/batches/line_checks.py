"""A batch's input file read line by line: each line a request to run, or refused as read with the reason
its error-file line gives.

Each line is ``{"custom_id", "method": "POST", "url", "body"}``. A line that is not JSON, lacks a
custom_id or repeats one, names a method or url a batch may not, or asks for a stream is refused on
its own, and the rest of the file runs. A refused line keeps its custom_id in the error file, except
a repeated one: that custom_id belongs to its first line, so that every custom_id is in the output
and error files exactly once; the error names the line instead. Blank lines are skipped.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from autoglm.errors import quote_value
from autoglm.server.batches.endpoints import BatchEndpoints
from autoglm.server.batches.records import LineRequest
from autoglm.server.batches.results import LineResult, not_run

LINE_FIELDS = ("custom_id", "method", "url", "body")


@dataclass(frozen=True)
class RefusedLine:
    """A line refused as read: its number, and its entry in the error file."""

    line: int
    result: LineResult


class TooManyLines(Exception):
    """The file holds more lines than the max_file_lines setting allows."""


def read_lines(text_lines: Iterable[str], endpoints: BatchEndpoints,
               max_lines: int) -> list[LineRequest | RefusedLine]:
    """Each non-blank line of a file, in order, as a line to run or a line refused; TooManyLines past
    `max_lines` of them."""
    first_line_of: dict[str, int] = {}
    read: list[LineRequest | RefusedLine] = []
    for number, text in enumerate(text_lines, start=1):
        if not text.strip():
            continue
        if len(read) == max_lines:
            raise TooManyLines(f"the input file holds more than {max_lines} requests, the most one batch may hold "
                               f"(setting max_file_lines); split it into several batches")
        read.append(_read_line(number, text, first_line_of, endpoints))
    return read


def _read_line(number: int, text: str, first_line_of: dict[str, int],
               endpoints: BatchEndpoints) -> LineRequest | RefusedLine:
    try:
        request = json.loads(text)
    except json.JSONDecodeError as error:
        return _refused(number, None, "invalid_json",
                        f"line {number} is not valid JSON: {error.msg} at column {error.colno}")
    if not isinstance(request, dict):
        return _refused(number, None, "invalid_request", f"line {number} is not a JSON object; each line is "
                                                         f"{{\"custom_id\", \"method\", \"url\", \"body\"}}")
    custom_id = request.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        return _refused(number, None, "missing_custom_id", f"line {number} has no custom_id; each line needs a "
                                                           f"non-empty string custom_id, unique in the file")
    if custom_id in first_line_of:
        return _refused(number, None, "duplicate_custom_id",
                        f"line {number} repeats the custom_id {quote_value(custom_id)} of line "
                        f"{first_line_of[custom_id]}; custom_ids must be unique in a batch, and this line was not run")
    first_line_of[custom_id] = number
    problem = _request_problem(request, endpoints)
    if problem is not None:
        code, message = problem
        return _refused(number, custom_id, code, f"line {number}: {message}")
    return LineRequest(number, custom_id, request["url"], json.dumps(request["body"], ensure_ascii=False))


def _request_problem(request: dict[str, object], endpoints: BatchEndpoints) -> tuple[str, str] | None:
    """What keeps a line with a custom_id from running, as an error code and message."""
    unknown = [name for name in request if name not in LINE_FIELDS]
    if unknown:
        return "unknown_parameter", (f"unknown field {quote_value(unknown[0])}; a line holds only "
                                     f"{', '.join(LINE_FIELDS)}")
    if request.get("method") != "POST":
        return "invalid_method", f"method must be \"POST\", got {quote_value(request.get('method'))}"
    url_problem = endpoints.problem(request.get("url"))
    if url_problem is not None:
        return url_problem.code, f"url {url_problem.message}"
    body = request.get("body")
    if not isinstance(body, dict):
        return "invalid_body", "body must be a JSON object: the request the url takes"
    if body.get("stream") not in (None, False):
        return "stream_unsupported", "a batch line cannot stream; leave out \"stream\" or set it to false"
    return None


def _refused(number: int, custom_id: str | None, code: str, message: str) -> RefusedLine:
    return RefusedLine(number, not_run(custom_id, code, message, number))
