"""Which kernel files a CPU compiles: only those whose instructions it has.

Most of a build is the compiler's time per file, so a CPU compiles no kernel it could never
run. The choice follows the flags the CPU itself reports, never ``AUTOGLM_CPU_DISABLE_FLAGS``
(which only hides flags from the engine): a run that hides some reuses the same build.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autoglm.kernels.kernel_spec import KernelSpec

LIBRARY_NAME = "autoglm_cpu_kernels"
AVX512_FLAGS = ("avx512f", "avx512bw")
AVX512_BF16_FLAGS = (*AVX512_FLAGS, "avx512_bf16")
AVX512_VNNI_FLAGS = (*AVX512_FLAGS, "avx512_vnni")
_FOLDER = Path(__file__).parent


@dataclass(frozen=True)
class KernelSource:
    """A file of the library, the CPU flags its code needs, and the macro that tells bindings.cpp it was compiled."""

    file: str
    cpu_flags: tuple[str, ...] = ()
    macro: str | None = None


# The library's floor (AVX2 and FMA) first, starting with bindings.cpp, the longest to compile.
SOURCES = (
    KernelSource("bindings.cpp"),
    KernelSource("bf16_weight_linear_avx2.cpp"),
    KernelSource("fused_elementwise.cpp"),
    KernelSource("bf16_weight_linear_avx512.cpp", AVX512_FLAGS, "AUTOGLM_KERNELS_AVX512"),
    KernelSource("paged_decode_attention.cpp", AVX512_FLAGS, "AUTOGLM_KERNELS_AVX512"),
    KernelSource("silu_and_mul.cpp", AVX512_FLAGS, "AUTOGLM_KERNELS_AVX512"),
    KernelSource("decode_step.cpp", AVX512_FLAGS, "AUTOGLM_KERNELS_AVX512"),
    KernelSource("bf16_dot_linear.cpp", AVX512_BF16_FLAGS, "AUTOGLM_KERNELS_AVX512_BF16"),
    KernelSource("int8_activation_linear.cpp", AVX512_VNNI_FLAGS, "AUTOGLM_KERNELS_AVX512_VNNI"),
)
HEADERS = ("cpu_kernels.h", "bf16_weight_tiles.h", "exp_avx512.h", "bf16_bits.h")


def cpu_kernel_spec(cpu_flags: frozenset[str]) -> KernelSpec:
    """The library for a CPU reporting ``cpu_flags``: the files it can run, and macros naming the optional ones."""
    chosen = [source for source in SOURCES if set(source.cpu_flags) <= cpu_flags]
    macros = sorted({f"-D{source.macro}" for source in chosen if source.macro})
    return KernelSpec(
        name=LIBRARY_NAME,
        sources=tuple(str(_FOLDER / source.file) for source in chosen),
        headers=tuple(str(_FOLDER / header) for header in HEADERS),
        cflags=("-O3", "-fopenmp", *macros),
        ldflags=("-fopenmp",),
    )
