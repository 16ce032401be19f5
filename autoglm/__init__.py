"""Open-AutoGLM: a paged-attention LLM inference and serving engine on PyTorch.

Public names load on first use, so ``import autoglm.config`` (or the CLI's help) does not
pull in torch and transformers.
"""
from importlib import import_module

__version__ = "0.1.0"

_PUBLIC = {
    "AutoGLMConfig": "autoglm.config",
    "LLM": "autoglm.llm",
    "OpenAutoGLM": "autoglm.llm",
    "SamplingParams": "autoglm.sampling_params",
    "PoolingParams": "autoglm.pooling_params",
    "RequestOutput": "autoglm.outputs",
    "CompletionOutput": "autoglm.outputs",
    "Logprob": "autoglm.outputs",
    "PoolingRequestOutput": "autoglm.outputs",
}

__all__ = [*_PUBLIC, "__version__"]


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'autoglm' has no attribute {name!r}")
