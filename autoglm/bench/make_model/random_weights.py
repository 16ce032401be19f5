"""Seeded random weights for a model, or for a part of one, allocated once in the dtype they are saved in."""
from __future__ import annotations

import torch
import transformers
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel


def fill_random(module: nn.Module, initializer_range: float, generator: torch.Generator) -> None:
    """Norm weights to one; every other parameter, then every saved buffer (a router's score correction), seeded normal.

    The draws follow the module's own order, so the same generator state writes the same values. Buffers come after
    all parameters: a model without saved buffers draws exactly what it drew before they were filled.
    """
    norm_weights = {f"{name}.weight" for name, child in module.named_modules() if "Norm" in type(child).__name__}
    saved = module.state_dict(keep_vars=True).keys()
    with torch.no_grad():
        for name, parameter in module.named_parameters():  # tied parameters come once
            if name in norm_weights:
                parameter.fill_(1.0)
            else:
                parameter.normal_(0.0, initializer_range, generator=generator)
        for name, buffer in module.named_buffers():
            if name in saved:
                buffer.normal_(0.0, initializer_range, generator=generator)


def _compute_derived_buffers(model: PreTrainedModel) -> None:
    """Rotary frequencies and the like are computed from the config, never saved: the model's own initialiser computes
    them, on the modules that hold such buffers and on no others (it skips modules marked initialised)."""
    for module in model.modules():
        module._is_hf_initialized = not module._non_persistent_buffers_set
    model.initialize_weights()


def build_random_model(config: PretrainedConfig, dtype: torch.dtype, generator: torch.Generator) -> PreTrainedModel:
    """Seeded normal weights, allocated once in ``dtype``: a 9B model never needs a float32 copy."""
    model_class = getattr(transformers, config.architectures[0])
    with torch.device("meta"):
        model = model_class._from_config(config, dtype=dtype)
    model.to_empty(device="cpu")
    model.tie_weights()  # to_empty gives each tied parameter its own storage again
    _compute_derived_buffers(model)
    fill_random(model, config.get_text_config().initializer_range, generator)
    return model.eval()
