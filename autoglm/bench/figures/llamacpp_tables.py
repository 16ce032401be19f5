"""The table of a ``bench compare-llamacpp`` file, and its cell in the glance table: the engine against
llama.cpp at the same precision, batch-1 decode and prompt processing."""
from __future__ import annotations

from autoglm.bench.figures.tables import caption
from autoglm.bench.llamacpp.report import MEASURES, comparison_rows
from autoglm.bench.results.formats import bold, markdown_table, rate, ratio
from autoglm.bench.results.machine import same_device
from autoglm.bench.results.results_files import ResultsFile

GLANCE_PRECISION = "bfloat16"  # the glance table's engine runs the bfloat16 checkpoint as it is


def _backend(features: dict[str, bool] | None) -> str:
    if features is None:
        return "its CPU backend's instruction sets not recorded"
    built = [name.upper() for name, present in features.items() if present]
    left_out = [name.upper() for name, present in features.items() if not present]
    return f"its CPU backend built for {', '.join(built) or 'none of them'}" + (
        f", not {', '.join(left_out)}" if left_out else "")


def compare_llamacpp(results: ResultsFile) -> str:
    """Decode and prompt processing, one row per precision; under them the threads and llama.cpp's build."""
    document = results.data
    build = document["llama_cpp"]
    tables = "\n\n".join(markdown_table(*comparison_rows(document, measure)) for measure in MEASURES)
    note = (f"\n\n{document['settings']['threads']} threads on both sides; llama.cpp build {build['build_commit']} "
            f"({build['build_number']}), {_backend(build['cpu_backend_features'])}. Ratio: the engine's rate over "
            "llama.cpp's, above 1x where the engine is faster.")
    return caption(results) + tables + note


def glance_cell(latency: ResultsFile, comparison: ResultsFile) -> str:
    """``**0.56x** of 38.4 tok/s``: the engine's bfloat16 batch-1 decode over llama.cpp's BF16 one, both
    measured in the comparison; it must be the CPU the row's other figures were measured on."""
    if not same_device(latency.machine, comparison.machine):
        raise ValueError(f"{latency.name} and {comparison.name} were measured on different machines; "
                         "a row is one CPU's")
    sides = comparison.at("precisions").get(GLANCE_PRECISION)
    if sides is None:
        return "not measured"
    return f"{bold(ratio(sides['ratios']['decode']))} of {rate(sides['llama_cpp']['decode_tokens_per_s'])}"
