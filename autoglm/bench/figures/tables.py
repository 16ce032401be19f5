"""The tables of the documents, one function per kind of results file.

Each table opens with the machine it was measured on and the files it was computed from.
"""
from __future__ import annotations

from autoglm.bench.ab.metrics import compare
from autoglm.bench.ab.report import revisions_line, summary_header, summary_rows
from autoglm.bench.kv_accuracy.report import SUMMARY_HEADER as KV_ACCURACY_HEADER
from autoglm.bench.kv_accuracy.report import summary_rows as kv_accuracy_rows
from autoglm.bench.results import quantities as q
from autoglm.bench.results.formats import (bold, duration, markdown_table, milliseconds, percent, rate,
                                           ratio)
from autoglm.bench.results.machine import describe_machine, same_device
from autoglm.bench.results.profile_report import linear_paths_rows as path_calls_rows
from autoglm.bench.results.results_files import ResultsFile
from autoglm.bench.roofline.report import linear_paths_rows, missing_kernels
from autoglm.bench.soak import report as soak_report
from autoglm.bench.speculative import report as speculative_report

GIGA = 1e9
SIDE_NAMES = {q.ENGINE: "engine", q.ENGINE_WITHOUT_CACHE: "engine, no prefix cache", q.BASELINE: "transformers"}
# Rows of the profile table: a title, and the profile's seconds that make it up; the forward's parts first.
FORWARD_ROWS = (
    ("forward: linear layers", ("forward_parts_s.linear",)),
    ("forward: attention", ("forward_parts_s.attention",)),
    ("forward: other (norms, rotary, activations, embedding)", ("forward_parts_s.other",)),
)
OUTSIDE_FORWARD_ROWS = (
    ("sampling", ("phases_s.sample",)),
    ("scheduling + preparing inputs + detokenizing",
     ("phases_s.schedule", "phases_s.prepare inputs", "phases_s.detokenize & outputs")),
)
# Shown only for a profile that timed it: a tensor-parallel engine's collectives.
COMMUNICATION_ROW = ("forward: communication between ranks (all-reduce, gather)", ("forward_parts_s.communication",))


def caption(*files: ResultsFile) -> str:
    """"Measured on <machine> (<files>):"; files measured on different devices cannot share a table."""
    first = files[0]
    for other in files[1:]:
        if not same_device(first.machine, other.machine):
            raise ValueError(f"{first.name} and {other.name} were measured on different machines; "
                             "a table quotes one machine")
    links = ", ".join(f"[`{file.name}`]({file.name})" for file in files)
    return f"Measured on {describe_machine(first.machine)} ({links}):\n\n"


def engine_formats_note(results: ResultsFile) -> str:
    """Under a latency or throughput table, the engine's weights and KV cache where they are not the
    checkpoint's dtype (the settings the run recorded); nothing otherwise."""
    engine = results.data.get("settings", {}).get("engine", {})
    formats = []
    if engine.get("quantization", "none") != "none":
        group_size = engine.get("quantization_group_size")
        formats.append(f"{engine['quantization']} weights" + (f" in groups of {group_size}" if group_size else "")
                       + (", the LM head too" if engine.get("quantize_lm_head") else ", the LM head in float"))
    if engine.get("kv_cache_dtype", "auto") != "auto":
        formats.append(f"kv_cache_dtype {engine['kv_cache_dtype']}")
    return f"\n\nThe engine ran with {' and '.join(formats)}." if formats else ""


def roofline_limits(bounds: ResultsFile) -> str:
    limits = q.Roofline.from_dict(bounds.data)
    rows = [["read bandwidth (sum of a float32 tensor)", f"{limits.read_bytes_per_s / GIGA:,.1f} GB/s"]]
    for dtype in limits.dtypes:
        best = limits.best_matmul(dtype)
        rows.append([f"{dtype} matmul, best of the shapes measured ({best.m}x{best.k}x{best.n})",
                     f"{best.flops_per_s / GIGA:,.0f} GFLOP/s"])
    return caption(bounds) + markdown_table([f"limit ({limits.num_threads} threads)", "measured"], rows)


def linear_paths(bounds: ResultsFile) -> str:
    """A ``bench roofline`` file's linear paths: what streams weights fastest at one row, what multiplies
    fastest in batches, and up to how many rows each kernel beat PyTorch."""
    paths = q.Roofline.from_dict(bounds.data).linear_paths
    if paths is None:
        raise ValueError(f"{bounds.name} has no linear paths: it was measured on an accelerator or before they were")
    header, rows = linear_paths_rows(paths)
    missing = missing_kernels(paths)
    return caption(bounds) + markdown_table(header, rows, text_columns=2) + (f"\n\nNot on this CPU: {missing}." if missing else "")


def roofline_bounds(bounds: ResultsFile) -> str:
    limits = q.roofline(bounds)
    per_dtype = limits.bounds()
    header = ["bound for the model", *(f"{dtype} weights" for dtype in per_dtype)]
    rows = [
        ["batch-1 decode: bandwidth / weight bytes per token",
         *(rate(bound["decode_tokens_per_s"]) for bound in per_dtype.values())],
        ["batched: matmul FLOP/s / (2 x parameters)",
         *(rate(bound["batched_tokens_per_s"]) for bound in per_dtype.values())],
    ]
    return caption(bounds) + markdown_table(header, rows)


def latency(latency_file: ResultsFile, bounds: ResultsFile | None = None) -> str:
    title = caption(latency_file) if bounds is None else caption(latency_file, bounds)
    header = ["prompt tokens", "TTFT engine", "TTFT transformers", "TTFT speed-up",
              "decode engine", "decode transformers", "decode ratio"]
    if bounds is not None:
        header += ["engine of bound", "transformers of bound"]
    rows = []
    for input_len in latency_file.at("input_lens"):
        sides = [q.latency_side(latency_file, input_len, side) for side in (q.ENGINE, q.BASELINE)]
        both = all(side is not None for side in sides)
        row = [input_len]
        row += [duration(side["mean_ttft_s"]) if side else "" for side in sides]
        row += [bold(ratio(q.ttft_speedup(latency_file, input_len))) if both else ""]
        row += [rate(side["decode_tokens_per_s"]) if side else "" for side in sides]
        row += [bold(ratio(q.decode_ratio(latency_file, input_len))) if both else ""]
        if bounds is not None:
            row += [percent(q.decode_bound_fraction(latency_file, bounds, input_len, name)) if side else ""
                    for name, side in zip((q.ENGINE, q.BASELINE), sides)]
        rows.append(row)
    return title + markdown_table(header, rows) + engine_formats_note(latency_file)


def _compute_bound_cell(throughput: ResultsFile, bounds: ResultsFile, workload: str, side: str) -> str:
    result = q.throughput_side(throughput, workload, side)
    if side == q.BASELINE:
        return ""
    if result["prefix_cache_hit_rate"] > 0:
        return "(cached prompts)"  # cached prompt tokens count in total tok/s but cost no compute
    return percent(q.compute_bound_fraction(throughput, bounds, workload, side))


def throughput(throughput_file: ResultsFile, bounds: ResultsFile | None = None) -> str:
    title = caption(throughput_file) if bounds is None else caption(throughput_file, bounds)
    header = ["workload", "side", "time (s)", "output tok/s", "total tok/s", "vs transformers"]
    header += ["of compute bound"] if bounds is not None else []
    rows = []
    for workload, sides in throughput_file.at("workloads").items():
        for side in SIDE_NAMES:
            if side not in sides:
                continue
            result = sides[side]
            versus = ""
            if side != q.BASELINE and q.BASELINE in sides:
                versus = ratio(q.throughput_ratio(throughput_file, workload, side))
                versus = bold(versus) if side == q.ENGINE else versus
            row = [workload, SIDE_NAMES[side], f"{result['elapsed_s']:.1f}", f"{q.output_rate(result):,.1f}",
                   f"{q.total_rate(result):,.1f}", versus]
            if bounds is not None:
                row.append(_compute_bound_cell(throughput_file, bounds, workload, side))
            rows.append(row)
    return title + markdown_table(header, rows, text_columns=2) + engine_formats_note(throughput_file)


def step_profile(throughput_file: ResultsFile) -> str:
    workloads = [name for name, sides in throughput_file.at("workloads").items()
                 if sides.get(q.ENGINE, {}).get("profile") is not None]
    if not workloads:
        raise ValueError(f"{throughput_file.name} holds no profile: it was run without --profile")
    rows = [["steps", *(str(throughput_file.at(f"workloads.{name}.{q.ENGINE}.profile.num_steps"))
                        for name in workloads)]]
    communicated = any(_profiled(throughput_file, name, COMMUNICATION_ROW[1][0]) for name in workloads)
    forward_rows = (*FORWARD_ROWS, COMMUNICATION_ROW) if communicated else FORWARD_ROWS
    for title, paths in (*forward_rows, *OUTSIDE_FORWARD_ROWS):
        rows.append([title, *(f"{sum(q.step_share(throughput_file, name, path) for path in paths):.1%}"
                              for name in workloads)])
    rows.append([bold("everything but the forward"),
                 *(bold(f"{q.step_share(throughput_file, name, 'overhead_s'):.1%}") for name in workloads)])
    return caption(throughput_file) + markdown_table(["phase", *workloads], rows)


def _profiled(throughput_file: ResultsFile, workload: str, seconds_path: str) -> bool:
    """The profile timed this part, and it took time (older files and single processes have no communication)."""
    try:
        return throughput_file.at(f"workloads.{workload}.{q.ENGINE}.profile.{seconds_path}") > 0
    except KeyError:
        return False


def linear_path_calls(throughput_file: ResultsFile, workload: str) -> str:
    """A ``--profile`` run's count of which path each projection took, in calls."""
    linear_paths = throughput_file.at(f"workloads.{workload}.{q.ENGINE}.profile").get("linear_paths")
    if not linear_paths:
        raise ValueError(f"{throughput_file.name} holds no path counts for {workload}: it was run before they were")
    return caption(throughput_file) + markdown_table(*path_calls_rows(linear_paths))


def serving(title: str, *labelled_files: tuple[str, ResultsFile]) -> str:
    """One row per file (one request rate each), labelled as the marker says under a ``title`` column."""
    header = [title, "failed", "median TTFT", "median ITL", "P99 ITL", "P99 / median ITL"]
    rows = []
    for label, file in labelled_files:
        metrics = q.serve_metrics(file)
        rows.append([label, f"{metrics['failed']} / {metrics['completed'] + metrics['failed']}",
                     duration(metrics["ttft"]["median_ms"] / 1e3), milliseconds(metrics["itl"]["median_ms"]),
                     milliseconds(metrics["itl"]["p99_ms"]), ratio(q.itl_tail_ratio(file))])
    return caption(*(file for _, file in labelled_files)) + markdown_table(header, rows)


def ab(comparison: ResultsFile) -> str:
    """An ``autoglm bench ab`` file: which revisions, then each headline metric's medians and verdict."""
    document = comparison.data
    rows = summary_rows(compare(document), document["min_ratio"])
    return caption(comparison) + revisions_line(document) + ":\n\n" + markdown_table(summary_header(document), rows)


def kv_cache_accuracy(accuracy: ResultsFile) -> str:
    """A ``bench kv-accuracy`` file: each kv_cache_dtype's bytes, perplexity and agreement with ``auto``."""
    return caption(accuracy) + markdown_table(KV_ACCURACY_HEADER, kv_accuracy_rows(accuracy.data), text_columns=2)


def speculative(results: ResultsFile) -> str:
    """A ``bench speculative`` file: acceptance, tokens per target pass and batch-1 decode speed of each proposer."""
    return caption(results) + markdown_table(speculative_report.HEADER, speculative_report.table_rows(results.data))


def soak(soak_file: ResultsFile) -> str:
    """The victims' gaps in each phase, what else was sent and how it was answered, and the server's memory."""
    document = soak_file.data
    header = ["phase", "victim requests", "median ITL", "P99 ITL", "other requests (status: count)"]
    rows = []
    for phase in ("baseline", "hostile"):
        figures = document[phase]
        others = ", ".join(f"{name}: {count}" for name, count in figures["statuses"].items()
                           if not name.startswith("victim"))
        rows.append([phase, str(figures["victim_requests"]), milliseconds(figures["itl"]["median_ms"]),
                     milliseconds(figures["itl"]["p99_ms"]), others or "none"])
    rss = document["server_rss_bytes"]
    summary = (f"\n\n{soak_report.requests_sent(document):,} requests in all; p99 ITL with / without the hostile "
               f"load: {bold(ratio(soak_report.p99_itl_ratio(document)))}")
    if rss["before"] is not None:
        summary += (f"; server resident memory {rss['before'] / 2**20:,.0f} MiB before the hostile phase, "
                    f"{rss['after'] / 2**20:,.0f} MiB after ({bold(f'{soak_report.rss_growth(document):+.1%}')})")
    return caption(soak_file) + markdown_table(header, rows) + summary + "."
