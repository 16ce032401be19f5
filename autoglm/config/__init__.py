"""Settings: the flat class users fill from files, environment and flags, and the per-layer views it splits into."""
from autoglm.config.engine import EngineConfig
from autoglm.config.server import ServerConfig
from autoglm.config.settings import AutoGLMConfig, ConfigError, SettingGroup

__all__ = ["AutoGLMConfig", "ConfigError", "EngineConfig", "ServerConfig", "SettingGroup"]
