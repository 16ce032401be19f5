"""Settings: the flat class users fill from files, environment and flags, and the per-layer views it splits into."""
from autoglm.config.settings import AutoGLMConfig, ConfigError, SettingGroup

__all__ = ["AutoGLMConfig", "ConfigError", "SettingGroup"]
