"""Where models come from: a folder the user names, or the small model shipped in the package."""
from __future__ import annotations

from pathlib import Path

DEFAULT_MODEL_DIR = Path(__file__).parent / "assets" / "glm4-tiny-shakespeare"
DEFAULT_MODEL_NAME = "glm4-tiny-shakespeare"
# A much smaller model of the same tokenizer and corpus: the default model's draft for speculative decoding.
DEFAULT_DRAFT_MODEL_DIR = Path(__file__).parent / "assets" / "glm4-tiny-shakespeare-draft"


def resolve_model_path(model: str | None) -> Path:
    """The checkpoint folder for ``model``; None means the embedded default model."""
    path = DEFAULT_MODEL_DIR if model is None else Path(model).expanduser()
    if not path.is_dir():
        if model is None:
            raise FileNotFoundError(
                f"the embedded default model is missing from {path}; reinstall the package or pass --model"
            )
        raise FileNotFoundError(f"model folder not found: {path} (expected a Hugging Face checkpoint folder)")
    return path
