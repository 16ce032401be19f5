"""``python -m autoglm.bench.figures DOC.md...``: regenerate the documents' figures, or with
``--check`` exit 1 when any document differs from what its results files say."""
from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

from autoglm.bench.figures.markers import MarkerError
from autoglm.bench.figures.render import render_document


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autoglm.bench.figures", description=__doc__)
    parser.add_argument("documents", nargs="+", type=Path, help="Markdown files with <!-- figures:... --> markers")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 and show the difference when a document is out of date")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out_of_date = 0
    for document in args.documents:
        text = document.read_text()
        try:
            generated = render_document(text, document.parent)
        except MarkerError as error:
            print(f"{document}: {error}", file=sys.stderr)
            return 2
        if generated == text:
            continue
        if args.check:
            out_of_date += 1
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(keepends=True), generated.splitlines(keepends=True),
                f"{document} (as written)", f"{document} (from its results files)"))
            print(f"{document}: figures differ from its results files; run python -m autoglm.bench.figures {document}")
        else:
            document.write_text(generated)
            print(f"rewrote the figures of {document}")
    return 1 if out_of_date else 0
