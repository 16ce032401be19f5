"""The engine's own implementations of the supported model families and their loader."""
from autoglm.models.loader import load_model, resolve_dtype
from autoglm.models.model_config import ModelConfig
from autoglm.models.registry import SUPPORTED_ARCHITECTURES

__all__ = ["SUPPORTED_ARCHITECTURES", "ModelConfig", "load_model", "resolve_dtype"]
