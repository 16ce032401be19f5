"""``--profile``: a step profile as a table of where the time went."""
from __future__ import annotations

from autoglm.bench.report import format_table
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
    return title + "\n" + format_table(["phase", "total s", "ms/step", "of step"], rows)
