"""A results file's machine in words, e.g. "Intel Xeon Processor @ 2.80GHz, 2 CPUs, AVX-512 with
VNNI, no AVX512-BF16/AMX; torch 2.13.0+cpu": what each figure says it was measured on."""
from __future__ import annotations

from typing import Any

# CPU flags that let a CPU multiply bfloat16 matrices in hardware, and how the docs name them.
BF16_FLAGS = (("avx512_bf16", "AVX512-BF16"), ("amx_bf16", "AMX"))
NUMBER_WORDS = {1: "one", 2: "two", 4: "four", 8: "eight"}


def _cpu_name(model: str) -> str:
    return " ".join(model.replace("(R)", "").replace("(TM)", "").split())


def _instruction_sets(flags: dict[str, bool | None]) -> str:
    """``AVX-512 with VNNI, no AVX512-BF16/AMX``; names only what the record says."""
    parts = []
    if flags.get("avx512f"):
        parts.append("AVX-512 with VNNI" if flags.get("avx512_vnni") else "AVX-512")
    elif flags.get("avx2"):
        parts.append("AVX2, no AVX-512")
    has = [name for flag, name in BF16_FLAGS if flags.get(flag)]
    lacks = [name for flag, name in BF16_FLAGS if flags.get(flag) is False]
    if has:
        parts.append(" and ".join(has))
    if lacks:
        parts.append("no " + "/".join(lacks))
    return ", ".join(parts)


def describe_cpu(machine: dict[str, Any]) -> str:
    """``AMD EPYC, 2 CPUs, AVX-512 with VNNI, AVX512-BF16, no AMX``: the CPU alone, without the software."""
    parts = [_cpu_name(machine["cpu_model"])] if machine.get("cpu_model") else []
    if machine.get("cpu_count"):
        parts.append(f"{machine['cpu_count']} CPUs")
    if machine.get("cpu_flags"):
        parts.append(_instruction_sets(machine["cpu_flags"]))
    if machine.get("cpu_flags_disabled"):
        parts.append(f"run as without {'/'.join(machine['cpu_flags_disabled'])} (AUTOGLM_CPU_DISABLE_FLAGS)")
    return ", ".join(part for part in parts if part)


def _accelerators(names: list[str]) -> str:
    groups = {name: names.count(name) for name in names}
    return ", ".join(f"{NUMBER_WORDS.get(count, count)} {name}" for name, count in groups.items())


def describe_machine(machine: dict[str, Any]) -> str:
    """The accelerators, if any, with the CPU as their host; then the software versions."""
    cpu = describe_cpu(machine)
    accelerators = machine.get("accelerators") or []
    hardware = _accelerators(accelerators) + (f" (host: {cpu})" if cpu else "") if accelerators else cpu
    versions = ", ".join(f"{package} {machine[key]}" for package, key in
                         (("torch", "torch_version"), ("transformers", "transformers_version")) if machine.get(key))
    return "; ".join(part for part in (hardware, versions) if part) or "an unnamed machine"


def same_device(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether two records name the same device: the same accelerators, or with none the same CPU."""
    def device(machine: dict[str, Any]) -> tuple[Any, ...]:
        accelerators = machine.get("accelerators") or []
        return tuple(accelerators) if accelerators else (machine.get("cpu_model"), machine.get("cpu_count"))
    return device(first) == device(second)
