"""Decode-sized linear layers on the CPU that read bfloat16 weights and compute in float32.

On CPUs without bfloat16 matrix instructions the engine computes a bfloat16 checkpoint in
float32 (see ``platforms.compute_dtype``), which doubles the bytes each decode step reads.
For steps of at most :data:`SMALL_BATCH_ROWS` rows, a layer holding a bfloat16 copy of its
weight runs the kernel in ``bf16_weight_linear.cpp`` instead: half the bytes, same float32
math (widening bfloat16 is exact). Larger batches are compute-bound and keep the float32
matmul. The kernel is built once per machine with PyTorch's extension builder and cached;
where it cannot be built, nothing changes but the speed.
"""
from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import torch
from torch import nn

from autoglm.platforms import cpu_has_flags

logger = logging.getLogger(__name__)

SMALL_BATCH_ROWS = 8  # up to here the kernel beat the float32 matmul on every layer shape measured
_SOURCE = Path(__file__).with_name("bf16_weight_linear.cpp")
REQUIRED_CPU_FLAGS = ("avx512f", "avx512bw")
_K_MULTIPLE = 16  # the kernel reads 16 weights at a time

SmallBatchLinear = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@lru_cache(maxsize=1)
def load_small_batch_linear() -> SmallBatchLinear | None:
    """The compiled ``x @ w_bf16.T`` for float32 ``x``, or None where this CPU or toolchain cannot run it."""
    if not cpu_has_flags(*REQUIRED_CPU_FLAGS):
        return None
    from torch.utils.cpp_extension import load

    _put_ninja_on_path()
    logger.info("building the bfloat16-weight CPU kernel (once per machine; cached by PyTorch)")
    try:
        extension = load(
            name="autoglm_bf16_weight_linear",
            sources=[str(_SOURCE)],
            extra_cflags=["-O3", "-mavx512f", "-mavx512bw", "-fopenmp"],
            extra_ldflags=["-fopenmp"],
        )
    except (OSError, RuntimeError, ImportError) as error:  # no compiler, no ninja, a failed build
        logger.warning("bfloat16-weight CPU kernel unavailable (%s); decode reads float32 weights", error)
        return None
    return extension.linear_bf16_weight


def _put_ninja_on_path() -> None:
    """PyTorch runs ``ninja`` from PATH; the pip-installed one sits in an environment that may not be active."""
    if shutil.which("ninja") is None:
        try:
            import ninja
        except ImportError:
            return
        os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")


def keep_bf16_weight_copies(modules: list[nn.Module]) -> int:
    """Give each module's float32 ``weight``, upcast from a bfloat16 checkpoint (so the copy is exact),
    a bfloat16 copy ``weight_bf16`` for small batches; returns how many got one (0 without the kernel)."""
    if load_small_batch_linear() is None:
        return 0
    count = 0
    for module in modules:
        weight = module.weight
        if weight.dtype == torch.float32 and weight.device.type == "cpu" and weight.shape[1] % _K_MULTIPLE == 0:
            module.weight_bf16 = weight.detach().to(torch.bfloat16).contiguous()
            count += 1
    return count


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
           weight_bf16: torch.Tensor | None) -> torch.Tensor:
    """``F.linear``, through the bfloat16-weight kernel when there is a copy and few rows."""
    if weight_bf16 is not None and x.dim() == 2 and x.shape[0] <= SMALL_BATCH_ROWS:
        y = load_small_batch_linear()(x, weight_bf16)
        return y if bias is None else y + bias
    return torch.nn.functional.linear(x, weight, bias)
