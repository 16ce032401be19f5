"""``--profile``: a step profile as a table of where the time went."""
from __future__ import annotations

from autoglm.bench.results.report import format_table
from autoglm.profiling import FORWARD, StepProfile


def profile_table(profile: StepProfile) -> str:
    """Each phase's total, per-step mean and share of step time; forward parts indented under it."""
    steps = max(profile.num_steps, 1)

    def row(name: str, seconds: float) -> list[str]:
        share = seconds / profile.step_s if profile.step_s else 0.0
        return [name, f"{seconds:.3f}", f"{1000 * seconds / steps:.2f}", f"{share:.1%}"]

    rows = []
    for phase, seconds in profile.phases_s.items():
        rows.append(row(phase, seconds))
        if phase == FORWARD:
            rows.extend(row(f"  {part}", part_s) for part, part_s in profile.forward_parts_s.items())
    rows.append(row("step (all of it)", profile.step_s))
    rows.append(row("everything but forward", profile.overhead_s))
    title = f"where a step's time goes ({profile.num_steps} steps)"
    table = title + "\n" + format_table(["phase", "total s", "ms/step", "of step"], rows)
    if profile.linear_paths:
        table += "\n" + linear_paths_table(profile.linear_paths)
    return table


def linear_paths_rows(linear_paths: dict[str, dict[str, int]]) -> tuple[list[str], list[list[str]]]:
    """Which path each projection took, in calls: a kernel for steps of few rows, PyTorch's matmul beyond."""
    paths = sorted({path for calls in linear_paths.values() for path in calls})
    rows = [[projection, *(str(calls.get(path, 0)) for path in paths)] for projection, calls in linear_paths.items()]
    return ["projection", *paths], rows


def linear_paths_table(linear_paths: dict[str, dict[str, int]]) -> str:
    return "which path each projection took (calls)\n" + format_table(*linear_paths_rows(linear_paths))
