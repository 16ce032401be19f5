"""How each projection stores and multiplies its weights, chosen per model at load time, so that
model code knows nothing of kernels, CPUs, quantization or (later) sharding."""
from autoglm.models.linear_method.base import LinearMethodBase
from autoglm.models.linear_method.cpu_kernel import CpuKernelLinearMethod, measure_row_limits
from autoglm.models.linear_method.int_selection import WeightQuantization, with_int_weights
from autoglm.models.linear_method.row_limits import (
    ALL_ROWS,
    EveryRow,
    FixedRowLimit,
    MeasuredRowLimit,
    RowLimit,
    row_limit_for,
)
from autoglm.models.linear_method.selection import LinearMethods, linear_methods_for, process_weights_after_loading
from autoglm.models.linear_method.unquantized import UnquantizedLinearMethod

__all__ = [
    "ALL_ROWS",
    "CpuKernelLinearMethod",
    "EveryRow",
    "FixedRowLimit",
    "LinearMethodBase",
    "LinearMethods",
    "MeasuredRowLimit",
    "RowLimit",
    "UnquantizedLinearMethod",
    "WeightQuantization",
    "linear_methods_for",
    "measure_row_limits",
    "process_weights_after_loading",
    "row_limit_for",
    "with_int_weights",
]
