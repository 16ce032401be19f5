"""What ``make-model`` needs to know of one architecture: its config, and for a vision-language model its
marker tokens, chat template and image processor."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelShape:
    """A transformers ``model_type`` and the config values that give a real model's size.

    ``special_tokens`` are markers the tokenizer must hold as single tokens (a vision-language model's
    image markers); ``token_id_fields`` names the config fields (dotted for nested ones) that point at
    them, or at several of them (a list of end tokens). ``layers_key`` is the config path of the decoder's layer count, which ``--layers`` replaces.
    ``image_processor`` is the ``preprocessor_config.json`` a vision-language model's processor reads.
    """

    model_type: str
    architecture: str
    config: dict[str, Any] = field(default_factory=dict)
    layers_key: str = "num_hidden_layers"
    special_tokens: tuple[str, ...] = ()
    token_id_fields: dict[str, str | tuple[str, ...]] = field(default_factory=dict)
    chat_template: str | None = None
    image_processor: dict[str, Any] | None = None
