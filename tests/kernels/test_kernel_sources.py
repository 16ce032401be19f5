"""A CPU compiles only the kernel files it can run, chosen from the flags it reports itself."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autoglm.kernels.cpu_extension import CPU_KERNELS
from autoglm.kernels.cpu_kernel_sources import AVX512_BF16_FLAGS, AVX512_VNNI_FLAGS, cpu_kernel_spec
from autoglm.kernels.toolchain import toolchain_missing
from autoglm.platforms import CPU_DISABLE_FLAGS_ENV, cpu_has_flags
from tests.kernels.test_kernel_build import HANG_S, WITH_AUTOGLM

AVX2_CPU = frozenset({"avx", "avx2", "fma", "sse4_2"})


def files(spec) -> list[str]:
    return [Path(source).name for source in spec.sources]


def test_an_avx2_cpu_compiles_no_avx512_kernel_and_its_bindings_know_it():
    spec = cpu_kernel_spec(AVX2_CPU)
    assert files(spec) == ["bindings.cpp", "bf16_weight_linear_avx2.cpp", "fused_elementwise.cpp"]
    assert not [flag for flag in spec.cflags if flag.startswith("-D")]


def test_an_avx512_bf16_and_vnni_cpu_compiles_every_kernel_its_longest_file_first():
    spec = cpu_kernel_spec(AVX2_CPU | set(AVX512_BF16_FLAGS) | set(AVX512_VNNI_FLAGS))
    assert files(spec)[0] == "bindings.cpp"
    assert sorted(files(spec)) == sorted(path.name for path in Path(spec.sources[0]).parent.glob("*.cpp"))
    assert "-DAUTOGLM_KERNELS_AVX512" in spec.cflags and "-DAUTOGLM_KERNELS_AVX512_BF16" in spec.cflags
    assert "-DAUTOGLM_KERNELS_AVX512_VNNI" in spec.cflags
    assert "int8_activation_linear.cpp" not in files(cpu_kernel_spec(AVX2_CPU | set(AVX512_BF16_FLAGS)))
    assert cpu_kernel_spec(AVX2_CPU | {"avx512f", "avx512bw"}).key() not in (spec.key(), cpu_kernel_spec(AVX2_CPU).key())


def test_hiding_cpu_flags_from_the_engine_reuses_the_same_build():
    hidden = subprocess.run(
        [sys.executable, "-c", "from autoglm.kernels.cpu_extension import CPU_KERNELS; print(CPU_KERNELS.key())"],
        env={**WITH_AUTOGLM, CPU_DISABLE_FLAGS_ENV: " ".join(AVX512_BF16_FLAGS)}, capture_output=True, text=True,
        check=True)
    assert hidden.stdout.strip() == CPU_KERNELS.key()


_AVX2_LIBRARY = """
import sys
import torch
from pathlib import Path
from autoglm.kernels.background_build import BackgroundBuild
from autoglm.kernels.cpu_kernel_sources import cpu_kernel_spec
build = BackgroundBuild(cpu_kernel_spec(frozenset(sys.argv[2].split())), Path(sys.argv[1]))
build.start()
library = build.wait(float(sys.argv[3]))
x, w = torch.randn(3, 16), torch.randn(5, 16).bfloat16()
assert torch.allclose(library.linear_bf16_weight_avx2(x, w), x @ w.float().T, atol=1e-5)
for name in ("linear_bf16_weight_avx512", "paged_decode_attention", "paged_decode_attention_bf16",
             "paged_decode_attention_int8", "linear_int_a8"):
    assert callable(getattr(library, name))
library.linear_bf16_dot(x.bfloat16(), w)
"""


@pytest.mark.slow
@pytest.mark.skipif(not cpu_has_flags("avx2", "fma") or toolchain_missing() is not None,
                    reason="builds and runs the AVX2 kernels")
def test_an_avx2_build_keeps_every_function_name_and_the_kernels_left_out_say_why(tmp_path):
    # In a process of its own: one process cannot import two extension modules of one name.
    run = subprocess.run([sys.executable, "-c", _AVX2_LIBRARY, str(tmp_path), " ".join(AVX2_CPU), str(HANG_S)],
                         env=WITH_AUTOGLM, capture_output=True, text=True)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith(
        "RuntimeError: linear_bf16_dot was not compiled: this CPU lacks avx512f, avx512bw and avx512_bf16")
