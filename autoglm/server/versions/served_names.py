"""The names a server serves its models under, as requests, tenants and /v1/models spell them."""
from __future__ import annotations

import os
from pathlib import Path

from autoglm.config import ServerConfig
from autoglm.model_paths import DEFAULT_MODEL_NAME
from autoglm.server.versions.routing import model_name_of


def served_model_name(config: ServerConfig) -> str:
    """The name requests use for the model by default: the first served from the registry, else as configured,
    else the checkpoint folder's own name (never its path: where a model sits on disk is no client's business)."""
    if config.versions.serve_models:
        return model_name_of(config.versions.serve_models[0])
    if config.http.served_model_name:
        return config.http.served_model_name
    model = config.engine.model.model
    if model is None:
        return DEFAULT_MODEL_NAME
    return Path(os.path.abspath(Path(model).expanduser())).name or model


def served_model_names(config: ServerConfig) -> tuple[str, ...]:
    """Every model name the server serves from the start: each registry model serve_models names, else the one;
    then lora_modules' adapters."""
    if config.versions.serve_models:
        models = tuple(dict.fromkeys(model_name_of(reference) for reference in config.versions.serve_models))
    else:
        models = (served_model_name(config),)
    return (*models, *config.adapters.lora_modules)
