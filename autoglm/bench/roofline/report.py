"""How ``autoglm bench roofline`` shows what it measured: the limits, each linear path, the model's bounds."""
from __future__ import annotations

from pathlib import Path

from autoglm.bench.results.report import RECORDED_CPU_FLAGS, format_table, write_json
from autoglm.bench.results.roofline import LinearPaths, Roofline
from autoglm.platforms import cpu_has_flags, cpu_model, disabled_cpu_flags

GIGA = 1e9


def linear_paths_rows(paths: LinearPaths) -> tuple[list[str], list[list[str]]]:
    """A row per path: its one-row weight bandwidth, its FLOP/s per batch size, its measured row limit."""
    batch_rows = sorted({rate.m for rate in paths.rates if rate.m > 1})
    header = ["path", "activations x weights", "1 row: GB/s of weights", *(f"{m} rows: GFLOP/s" for m in batch_rows),
              "kernel up to (rows)"]
    table = []
    for name in dict.fromkeys((rate.path, rate.activation_dtype) for rate in paths.rates):
        rates = {rate.m: rate for rate in paths.rates if (rate.path, rate.activation_dtype) == name}
        first = next(iter(rates.values()))
        table.append([
            name[0], f"{first.activation_dtype} x {first.weight_dtype}",
            f"{rates[1].weight_bytes_per_s / GIGA:.1f}" if 1 in rates else "-",
            *(f"{rates[m].flops_per_s / GIGA:.0f}" if m in rates else "-" for m in batch_rows),
            str(paths.row_limits.get(name[0], "-")),
        ])
    return header, table


def missing_kernels(paths: LinearPaths) -> str:
    """``<kernel> (needs <flags>), ...``: the kernels this CPU cannot run; empty where it runs them all."""
    return ", ".join(f"{name} (needs {' '.join(flags)})" for name, flags in paths.missing.items())


def linear_paths_table(paths: LinearPaths) -> str:
    header, rows = linear_paths_rows(paths)
    missing = missing_kernels(paths)
    return format_table(header, rows, text_columns=2) + (f"\nnot on this CPU: {missing}" if missing else "")


def limits_table(roofline: Roofline) -> str:
    rows = [
        ["read bandwidth", "sum of a float32 tensor", f"{roofline.read_bytes_per_s / GIGA:.1f} GB/s"],
        ["copy bandwidth", "bytes read + written", f"{roofline.copy_bytes_per_s / GIGA:.1f} GB/s"],
    ]
    for dtype in roofline.dtypes:
        best = roofline.best_matmul(dtype)
        rows.append([f"{dtype} matmul", f"best at M={best.m}, K=N={best.k}", f"{best.flops_per_s / GIGA:.1f} GFLOP/s"])
    return format_table(["limit", "measured as", "value"], rows, text_columns=2)


def bounds_table(roofline: Roofline) -> str:
    rows = []
    for dtype, bound in roofline.bounds().items():
        label = f"{dtype} (engine)" if dtype == roofline.engine_dtype else dtype
        rows.append([label, f"{bound['weight_bytes_per_token'] / 2**20:.1f}",
                     f"{bound['decode_tokens_per_s']:.1f}", f"{bound['batched_tokens_per_s']:.1f}"])
    header = ["weights", "weight MiB/token", "batch-1 decode bound (tok/s)", "batched compute bound (tok/s)"]
    return format_table(header, rows, text_columns=1)


def cpu_kind() -> str:
    """The CPU and the flags that decide its paths, as the engine sees them (``AUTOGLM_CPU_DISABLE_FLAGS`` hides)."""
    has = [flag for flag in RECORDED_CPU_FLAGS if cpu_has_flags(flag)]
    lacks = [flag for flag in RECORDED_CPU_FLAGS if not cpu_has_flags(flag)]
    hidden = sorted(disabled_cpu_flags())
    return (f"cpu: {cpu_model()}; has {' '.join(has) or 'none of them'}; lacks {' '.join(lacks) or 'none'}"
            + (f"; hidden by AUTOGLM_CPU_DISABLE_FLAGS: {' '.join(hidden)}" if hidden else ""))


def report_roofline(roofline: Roofline, output_json: Path | None) -> None:
    print(f"device: {roofline.device}, torch threads: {roofline.num_threads}")
    if roofline.device.startswith("cpu"):
        print(cpu_kind())
    print(limits_table(roofline))
    if roofline.linear_paths is not None:
        print("\nlinear layers, each path (one row: a weight larger than the caches; batches: "
              f"{roofline.linear_paths.rates[-1].k} x {roofline.linear_paths.rates[-1].k} weights):")
        print(linear_paths_table(roofline.linear_paths))
    if roofline.weights is not None:
        weights = roofline.weights
        print(f"\nmodel {roofline.model}: {weights.total_params:,} parameters, {weights.per_token_params:,} per token "
              f"(embedding table of {weights.embedding_params:,} excluded, lm_head included)")
        print(bounds_table(roofline))
    if output_json is not None:
        write_json(output_json, roofline.to_dict())
