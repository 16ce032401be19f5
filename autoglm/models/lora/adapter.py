"""A PEFT LoRA adapter read from its folder and checked against the base model before anything is loaded.

The folder holds ``adapter_config.json`` and ``adapter_model.safetensors`` whose tensors are named
``base_model.model.<module>.lora_A.weight`` ([rank, in]) and ``...lora_B.weight`` ([out, rank]). An adapter of
a vision-language model names its decoder's modules under ``model.language_model.``, read here as the engine's
``model.``; the vision encoder takes no adapter. Every refusal is a :class:`LoRAAdapterError` naming the adapter,
what is wrong and what is allowed.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from autoglm.errors import LoRAAdapterError, LoRAAdapterNotFoundError, quote_value
from autoglm.lora_adapter import LoRAAdapter
from autoglm.lora_request import LoRARequest
from autoglm.models.lora.targets import TARGET_MODULES, ProjectionTarget
from autoglm.models.vision_weights import VISION_PREFIXES, decoder_name

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"
PICKLED_WEIGHTS_FILE = "adapter_model.bin"
_PEFT_PREFIX = "base_model.model."
_MATRICES = {"lora_A.weight": 0, "lora_B.weight": 1}


def read_adapter(request: LoRARequest, targets: Mapping[str, ProjectionTarget], max_rank: int) -> LoRAAdapter:
    """The adapter ``request`` names, read from its folder; refused unless every tensor fits a projection of
    ``targets`` (the base model's) and its rank is at most ``max_rank``."""
    folder = Path(request.lora_path)
    refuse = _Refusal(request)
    if not folder.is_dir():
        raise LoRAAdapterNotFoundError(refuse.message(f"folder {quote_value(str(folder))} does not exist"))
    settings = _read_settings(folder / CONFIG_FILE, refuse)
    rank = _rank(settings, max_rank, refuse)
    scale = _scale(settings, rank, refuse)
    targeted = _target_modules(settings, refuse)
    weights_path = folder / WEIGHTS_FILE
    if not weights_path.is_file():
        if (folder / PICKLED_WEIGHTS_FILE).is_file():
            raise LoRAAdapterError(refuse.message(
                f"has {PICKLED_WEIGHTS_FILE} only; only {WEIGHTS_FILE} is read (pickled weights can run code): "
                "save it again with save_pretrained(..., safe_serialization=True)"))
        raise LoRAAdapterNotFoundError(refuse.message(f"folder {quote_value(str(folder))} has no {WEIGHTS_FILE}"))
    content = weights_path.read_bytes()
    try:
        tensors = load_file(weights_path)
    except (SafetensorError, OSError) as error:
        raise LoRAAdapterError(refuse.message(f"{WEIGHTS_FILE} is not a readable safetensors file ({error})")) from None
    weights = _pairs(tensors, targets, targeted, rank, refuse)
    digest = hashlib.blake2b(content, digest_size=16, person=b"autoglm-lora").digest()
    return LoRAAdapter(request, rank, scale, weights, digest)


class _Refusal:
    """Messages that name the adapter first."""

    def __init__(self, request: LoRARequest) -> None:
        self.prefix = f"LoRA adapter {quote_value(request.lora_name)} ({quote_value(request.lora_path)})"

    def message(self, problem: str) -> str:
        return f"{self.prefix}: {problem}"


def _read_settings(path: Path, refuse: _Refusal) -> dict:
    if not path.is_file():
        raise LoRAAdapterNotFoundError(refuse.message(f"has no {CONFIG_FILE}"))
    try:
        settings = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise LoRAAdapterError(refuse.message(f"{CONFIG_FILE} is not valid JSON ({error})")) from None
    if not isinstance(settings, dict):
        raise LoRAAdapterError(refuse.message(f"{CONFIG_FILE} must hold a JSON object"))
    peft_type = settings.get("peft_type", "LORA")
    if peft_type != "LORA":
        raise LoRAAdapterError(refuse.message(f"peft_type is {quote_value(peft_type)}; only 'LORA' is served"))
    unsupported = {"bias": (settings.get("bias", "none"), "none"),
                   "use_dora": (bool(settings.get("use_dora")), False),
                   "fan_in_fan_out": (bool(settings.get("fan_in_fan_out")), False),
                   "modules_to_save": (settings.get("modules_to_save") or None, None),
                   "rank_pattern": (settings.get("rank_pattern") or None, None),
                   "alpha_pattern": (settings.get("alpha_pattern") or None, None)}
    for key, (value, allowed) in unsupported.items():
        if value != allowed:
            raise LoRAAdapterError(refuse.message(f"{key} is {quote_value(value)}; only {allowed!r} is served"))
    return settings


def _rank(settings: dict, max_rank: int, refuse: _Refusal) -> int:
    rank = settings.get("r")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise LoRAAdapterError(refuse.message(f"r must be a positive integer, got {quote_value(rank)}"))
    if rank > max_rank:
        raise LoRAAdapterError(refuse.message(
            f"rank {rank} is above max_lora_rank {max_rank}; raise max_lora_rank (up to 64) to serve it"))
    return rank


def _scale(settings: dict, rank: int, refuse: _Refusal) -> float:
    """lora_alpha / r, or lora_alpha / sqrt(r) under rsLoRA, as PEFT scales."""
    alpha = settings.get("lora_alpha", 8)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise LoRAAdapterError(refuse.message(f"lora_alpha must be a number, got {quote_value(alpha)}"))
    return alpha / math.sqrt(rank) if settings.get("use_rslora") else alpha / rank


def _target_modules(settings: dict, refuse: _Refusal) -> Callable[[str], bool]:
    """Whether the adapter's config targets a module (by PEFT's name of it): a list of projection names, or a
    regular expression a whole module name must match, as PEFT reads a string."""
    modules = settings.get("target_modules")
    if isinstance(modules, str):
        try:
            pattern = re.compile(modules)
        except re.error as error:
            raise LoRAAdapterError(refuse.message(
                f"target_modules {quote_value(modules)} is not a regular expression ({error})")) from None
        return lambda module: pattern.fullmatch(module) is not None
    if not isinstance(modules, list) or not modules:
        raise LoRAAdapterError(refuse.message(
            f"target_modules must be a list of module names or a regular expression, got {quote_value(modules)}; "
            f"allowed names: {', '.join(TARGET_MODULES)}"))
    unknown = sorted(set(map(str, modules)) - set(TARGET_MODULES))
    if unknown:
        raise LoRAAdapterError(refuse.message(
            f"target module(s) {', '.join(unknown)} cannot be served; allowed: {', '.join(TARGET_MODULES)}"))
    names = set(modules)
    return lambda module: module.rpartition(".")[2] in names


def _pairs(tensors: dict[str, torch.Tensor], targets: Mapping[str, ProjectionTarget], targeted: Callable[[str], bool],
           rank: int, refuse: _Refusal) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Module name -> (A, B), every shape checked against the base model's projection."""
    found: dict[str, list[torch.Tensor | None]] = {}
    for name, tensor in tensors.items():
        peft_module, _, matrix = name.removeprefix(_PEFT_PREFIX).partition(".lora_")
        matrix = "lora_" + matrix
        if matrix not in _MATRICES:
            raise LoRAAdapterError(refuse.message(
                f"tensor {quote_value(name)} is not a LoRA matrix (lora_A.weight or lora_B.weight); embedding "
                "and bias tensors cannot be served"))
        if peft_module.startswith(VISION_PREFIXES):
            raise LoRAAdapterError(refuse.message(
                f"tensor {quote_value(name)} changes the vision encoder, which takes no adapter here; make the "
                "adapter for the language model's projections alone (target_modules as a regular expression such "
                "as '.*language_model.*\\.(q_proj|v_proj)')"))
        module = decoder_name(peft_module)
        target = targets.get(module)
        if target is None or not targeted(peft_module):
            short = module.rpartition(".")[2]
            raise LoRAAdapterError(refuse.message(
                f"tensor {quote_value(name)} is for module {quote_value(module)}, which the base model has no "
                f"projection for (its {short} is not among the adapter's targets or the model's layers)"))
        expected = (rank, target.in_features) if matrix == "lora_A.weight" else (target.out_features, rank)
        if tuple(tensor.shape) != expected:
            raise LoRAAdapterError(refuse.message(
                f"tensor {quote_value(name)} has shape {tuple(tensor.shape)} but the base model's {module} with "
                f"rank {rank} needs {expected}: the adapter was made for a model of other sizes"))
        found.setdefault(module, [None, None])[_MATRICES[matrix]] = tensor.float()
    missing = sorted(module for module, pair in found.items() if pair[0] is None or pair[1] is None)
    if missing:
        raise LoRAAdapterError(refuse.message(f"module(s) {', '.join(missing)} lack lora_A or lora_B"))
    if not found:
        raise LoRAAdapterError(refuse.message(f"{WEIGHTS_FILE} holds no LoRA matrices"))
    return {module: (pair[0], pair[1]) for module, pair in found.items()}
