"""How each projection stores and multiplies its weights, chosen per model at load time, so that
model code knows nothing of kernels, CPUs, quantization or (later) sharding."""
from autoglm.models.linear_method.base import LinearMethodBase
from autoglm.models.linear_method.cpu_bf16_weight import SMALL_BATCH_ROWS, CpuBf16WeightLinearMethod
from autoglm.models.linear_method.int_selection import WeightQuantization, with_int_weights
from autoglm.models.linear_method.selection import LinearMethods, linear_methods_for, process_weights_after_loading
from autoglm.models.linear_method.unquantized import UnquantizedLinearMethod

__all__ = [
    "SMALL_BATCH_ROWS",
    "CpuBf16WeightLinearMethod",
    "LinearMethodBase",
    "LinearMethods",
    "UnquantizedLinearMethod",
    "WeightQuantization",
    "linear_methods_for",
    "process_weights_after_loading",
    "with_int_weights",
]
