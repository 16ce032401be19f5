"""How the documents write numbers and tables, the same way in every figure."""
from __future__ import annotations

from collections.abc import Sequence


def duration(seconds: float) -> str:
    """``10.10 s``, ``752 ms`` or ``31.1 ms``: three significant digits or so at any scale."""
    if seconds >= 1:
        return f"{seconds:,.2f} s"
    milliseconds = seconds * 1e3
    return f"{milliseconds:.0f} ms" if milliseconds >= 100 else f"{milliseconds:.1f} ms"


def milliseconds(value_ms: float) -> str:
    return f"{value_ms:,.0f} ms"


def rate(tokens_per_s: float) -> str:
    return f"{tokens_per_s:,.1f} tok/s"


def ratio(value: float) -> str:
    return f"{value:.2f}x"


def percent(fraction: float) -> str:
    return f"{fraction:.0%}"


def bold(text: str) -> str:
    return f"**{text}**" if text else text


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]], text_columns: int = 1) -> str:
    """A pipe table: the first ``text_columns`` columns left-aligned, the numbers right-aligned."""
    alignment = ["---" if column < text_columns else "---:" for column in range(len(header))]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [header, alignment, *rows])
