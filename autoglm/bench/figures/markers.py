"""The marked regions of a Markdown document whose contents a generator owns.

A table (or any block): a line ``<!-- figures:KIND ARG... -->``, the generated lines, then
``<!-- /figures -->``. A figure inside a sentence: ``<!-- figure:KIND ARG... -->2.12x<!-- /figure -->``.
The comments do not show when the Markdown is rendered, so the prose reads as usual.
Arguments are split as a shell would, so a quoted one may hold spaces.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

BLOCK = "figures"
INLINE = "figure"
_OPENING = re.compile(r"<!-- (figures?):")
_REGION = re.compile(r"<!-- (figures?):(.*?) -->(.*?)<!-- /\1 -->", re.DOTALL)


class MarkerError(ValueError):
    """A marker that cannot be read or rendered; the message names its line."""


@dataclass(frozen=True)
class Marker:
    block: bool  # a region of whole lines, else a figure inside a line
    kind: str
    args: tuple[str, ...]
    line: int  # 1-based, for error messages


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _check_all_closed(text: str, regions: list[re.Match[str]]) -> None:
    starts = {region.start() for region in regions}
    for opening in _OPENING.finditer(text):
        if opening.start() not in starts:
            raise MarkerError(f"line {_line_of(text, opening.start())}: <!-- {opening[1]}:... --> has no "
                              f"<!-- /{opening[1]} --> after it")


def fill_markers(text: str, render: Callable[[Marker], str]) -> str:
    """``text`` with every marked region's contents replaced by what ``render`` makes of its marker."""
    regions = list(_REGION.finditer(text))
    _check_all_closed(text, regions)
    pieces, end = [], 0
    for region in regions:
        tag, spec = region[1], region[2]
        line = _line_of(text, region.start())
        words = shlex.split(spec)
        if not words:
            raise MarkerError(f"line {line}: <!-- {tag}: --> names no kind of figure")
        marker = Marker(block=tag == BLOCK, kind=words[0], args=tuple(words[1:]), line=line)
        try:
            content = render(marker)
        except (KeyError, ValueError, TypeError, OSError) as error:
            raise MarkerError(f"line {line}: {tag}:{spec}: {error}") from error
        body = f"\n{content}\n" if marker.block else content
        pieces += [text[end:region.start()], f"<!-- {tag}:{spec} -->{body}<!-- /{tag} -->"]
        end = region.end()
    return "".join(pieces) + text[end:]
