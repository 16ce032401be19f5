"""Which LoRA adapter a request runs with: plain data that the server, the offline API and the engine share."""
from __future__ import annotations

from dataclasses import dataclass

from autoglm.errors import InvalidRequestError, quote_value


@dataclass(frozen=True)
class LoRARequest:
    """An adapter a request runs with (vLLM's name and fields)."""

    lora_name: str  # the served name requests use as `model`
    lora_int_id: int  # the engine's id for it, > 0, unique per loaded adapter
    lora_path: str  # its folder: adapter_config.json + adapter_model.safetensors

    def __post_init__(self) -> None:
        if not isinstance(self.lora_name, str) or not self.lora_name:
            raise InvalidRequestError(f"lora_name must be a non-empty string, got {quote_value(self.lora_name)}")
        if isinstance(self.lora_int_id, bool) or not isinstance(self.lora_int_id, int) or self.lora_int_id <= 0:
            raise InvalidRequestError(f"adapter {quote_value(self.lora_name)}: lora_int_id must be an integer "
                                      f"above 0, got {quote_value(self.lora_int_id)}")
        if not isinstance(self.lora_path, str) or not self.lora_path:
            raise InvalidRequestError(f"adapter {quote_value(self.lora_name)}: lora_path must be a folder's path, "
                                      f"got {quote_value(self.lora_path)}")
