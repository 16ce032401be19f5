"""How ``autoglm bench compare-llamacpp`` shows a run: per precision, the engine's rate, llama.cpp's and their
ratio, for batch-1 decode and for prompt processing; the same rows make docs/PERFORMANCE.md's table."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from autoglm.bench.llamacpp.llama_bench import cpu_backend_features
from autoglm.bench.llamacpp.measure import CompareSettings, PrecisionComparison
from autoglm.bench.results.formats import ratio
from autoglm.bench.results.report import format_table, machine_info, write_json

# The two measures compared: how a table names each, given llama-bench's name of its test, and its figures' key.
MEASURES = {"decode": ("batch-1 decode ({test}), tok/s", "decode_test"),
            "prompt": ("prompt processing ({test}), tok/s", "prompt_test")}


def measure_title(document: dict[str, Any], measure: str) -> str:
    title, test = MEASURES[measure]
    return title.format(test=document["settings"][test])


def comparison_rows(document: dict[str, Any], measure: str) -> tuple[list[str], list[list[str]]]:
    """A results file's table of one measure: precision, engine, llama.cpp (with the GGUF's type), ratio."""
    header = [measure_title(document, measure), "engine", "llama.cpp", "ratio"]
    rows = []
    for name, sides in document["precisions"].items():
        key = f"{measure}_tokens_per_s"
        rows.append([name, f"{sides['engine'][key]:,.1f}",
                     f"{sides['llama_cpp'][key]:,.1f} ({sides['llama_cpp']['file_type']})",
                     ratio(sides["ratios"][measure])])
    return header, rows


def llama_cpp_build(settings: CompareSettings, comparisons: list[PrecisionComparison]) -> dict[str, Any]:
    """Which llama.cpp ran: its commit as llama-bench printed it, and the instruction sets its CPU backend uses."""
    first = comparisons[0].llama_cpp
    return {"llama_bench": str(settings.llama_bench), "build_commit": first.build_commit,
            "build_number": first.build_number, "backend": first.backend,
            "cpu_backend_features": cpu_backend_features(settings.llama_bench.parent)}


def comparison_report(settings: CompareSettings, comparisons: list[PrecisionComparison]) -> dict[str, Any]:
    """Everything needed to read or reproduce the run, for ``--output-json``."""
    return {
        "settings": {"threads": settings.threads, "n_prompt": settings.n_prompt, "n_gen": settings.n_gen,
                     "repetitions": settings.repetitions, "prompt_test": settings.prompt_test,
                     "decode_test": settings.decode_test,
                     "ggufs": {name: str(path) for name, path in settings.ggufs.items()},
                     "engine": settings.config.model_dump()},
        "machine": machine_info(),
        "llama_cpp": llama_cpp_build(settings, comparisons),
        "precisions": {c.precision.name: c.to_dict() for c in comparisons},
    }


def report_comparison(settings: CompareSettings, comparisons: list[PrecisionComparison],
                      output_json: Path | None) -> None:
    document = comparison_report(settings, comparisons)
    for measure in MEASURES:
        print(format_table(*comparison_rows(document, measure)))
        print()
    build = document["llama_cpp"]
    print(f"{settings.threads} threads on both sides; llama.cpp build {build['build_commit']} "
          f"({build['build_number']}); ratio: the engine's rate over llama.cpp's")
    if output_json is not None:
        write_json(output_json, document)
