"""``autoglm bench quant-accuracy`` prints each method's report as it measures it; the file is what is left."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from autoglm.bench.results.report import write_json


def report_quant_accuracy(results: dict[str, Any], output_json: Path | None) -> None:
    if output_json is not None:
        write_json(output_json, results)
