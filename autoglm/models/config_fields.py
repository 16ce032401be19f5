"""Typed access to a ``config.json`` dict, whose errors name the key and the file."""
from __future__ import annotations

from typing import Any


class ConfigFields:
    """Reads one config dict; ``source`` names it in every error."""

    def __init__(self, data: dict[str, Any], source: str) -> None:
        self.data = data
        self.source = source

    def required(self, key: str) -> Any:
        if self.data.get(key) is None:
            raise ValueError(f"{self.source} is missing the required key '{key}'")
        return self.data[key]

    def optional(self, key: str, default: Any) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def positive_int(self, key: str, default: int | None = None) -> int:
        value = self.required(key) if default is None else self.optional(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{self.source}: '{key}' must be a positive integer, got {value!r}")
        return value

    def non_negative_int(self, key: str, default: int) -> int:
        value = self.optional(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{self.source}: '{key}' must be an integer of at least 0, got {value!r}")
        return value

    def number(self, key: str) -> float:
        value = self.required(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{self.source}: '{key}' must be a number, got {value!r}")
        return float(value)

    def positive_number(self, key: str, default: float) -> float:
        value = self.optional(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{self.source}: '{key}' must be a positive number, got {value!r}")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.optional(key, default)
        if not isinstance(value, bool):
            raise ValueError(f"{self.source}: '{key}' must be true or false, got {value!r}")
        return value

    def indices(self, key: str, count: int) -> tuple[int, ...]:
        """A list of indices below ``count`` (absent: none)."""
        value = self.optional(key, [])
        if not isinstance(value, list) or not all(
            isinstance(index, int) and not isinstance(index, bool) and 0 <= index < count for index in value
        ):
            raise ValueError(f"{self.source}: '{key}' must be a list of integers from 0 to {count - 1}, got {value!r}")
        return tuple(value)
