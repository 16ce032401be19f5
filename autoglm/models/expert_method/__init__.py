"""How a layer's routed experts store and multiply their weights, chosen per model at load time like the linear
methods, so that the expert code knows nothing of kernels or quantization."""
from autoglm.models.expert_method.base import ExpertMethod
from autoglm.models.expert_method.unquantized import UnquantizedExpertMethod

__all__ = ["ExpertMethod", "UnquantizedExpertMethod"]
