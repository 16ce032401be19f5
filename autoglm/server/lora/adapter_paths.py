"""Where an adapter may be loaded from at runtime: under allowed_lora_path, after symbolic links are resolved,
so that an admin key cannot make the server read any folder on the machine."""
from __future__ import annotations

from http import HTTPStatus
from pathlib import Path

from autoglm.errors import quote_value
from autoglm.server.openai.errors import APIError


def allowed_adapter_folder(lora_path: str, allowed_lora_path: str | None) -> Path:
    """The folder `lora_path` names (relative to allowed_lora_path unless absolute), resolved; a 400 naming the
    setting if runtime loading is off or the folder lies outside it."""
    if allowed_lora_path is None:
        raise APIError(HTTPStatus.BAD_REQUEST, "loading LoRA adapters at runtime is off on this server; set "
                       "allowed_lora_path to the folder adapters may be loaded from", param="lora_path",
                       code="lora_loading_disabled")
    root = Path(allowed_lora_path).resolve()
    folder = (root / Path(lora_path).expanduser()).resolve()
    if not folder.is_relative_to(root):
        raise APIError(HTTPStatus.BAD_REQUEST, f"lora_path {quote_value(lora_path)} resolves to {folder}, outside "
                       f"allowed_lora_path ({root}); adapters load only from under it", param="lora_path",
                       code="lora_path_not_allowed")
    return folder
