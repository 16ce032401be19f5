"""The ``quantization_config`` of a checkpoint quantized in the ``compressed-tensors`` format.

That format (written by llm-compressor and by ``autoglm quantize``, read by vLLM) stores each
quantized projection as int8 values (``int-quantized``: ``weight``) or int4 values packed eight to
an int32 (``pack-quantized``: ``weight_packed``, ``weight_shape``), with ``weight_scale`` beside.
This engine reads its weight-only symmetric integer schemes (W8A16, W4A16): one config group of
``Linear`` targets, per channel or group-wise, the LM head quantized unless ``ignore`` names it. A
mixture-of-experts checkpoint's routers stay in full precision: ``ignore`` may name them (each
``model.layers.N.mlp.gate``, or a ``re:`` pattern such as ``re:.*mlp.gate$`` that matches a router and no
projection), as llm-compressor's recipes for such models do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from autoglm.models.linear_method.int_weights import SUPPORTED_BITS, IntWeightFormat

QUANT_METHOD = "compressed-tensors"
INT_FORMAT = "int-quantized"
PACKED_FORMAT = "pack-quantized"
LM_HEAD = "lm_head"
_STRATEGIES = ("channel", "group")
REGEX_PREFIX = "re:"  # how compressed-tensors marks a pattern among exact module names
ROUTER_PATTERN = f"{REGEX_PREFIX}.*mlp.gate$"  # every router, as llm-compressor's recipes name them
_ROUTER = re.compile(r"model\.layers\.\d+\.mlp\.gate")
# Module names a router pattern must match, and the quantized ones it must not.
_ROUTER_EXAMPLE = "model.layers.0.mlp.gate"
_PROJECTION_EXAMPLES = ("model.layers.0.mlp.gate_proj", "model.layers.0.mlp.experts.0.gate_proj",
                        "model.layers.0.mlp.shared_experts.gate_proj", "model.layers.0.self_attn.q_proj")


@dataclass(frozen=True)
class CheckpointQuantization:
    """How a pre-quantized checkpoint stores its projections' weights."""

    weight_format: IntWeightFormat
    packed: bool  # int4 values packed into int32 words (pack-quantized), else one int8 per value
    quantize_lm_head: bool


def parse_quantization_config(data: Any, source: str) -> CheckpointQuantization:
    """Read ``config.json``'s ``quantization_config``; every unsupported or malformed value is an error naming it."""
    where = f"{source}: quantization_config"
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a JSON object, got {data!r}")
    if data.get("quant_method") != QUANT_METHOD:
        raise ValueError(f"{where}: quant_method {data.get('quant_method')!r} is not supported; "
                         f"this engine reads '{QUANT_METHOD}' checkpoints")
    groups = data.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        raise ValueError(f"{where}: 'config_groups' must hold exactly one scheme, got {groups!r}")
    (group_name, scheme), = groups.items()
    if not isinstance(scheme, dict):
        raise ValueError(f"{where}: config group '{group_name}' must be a JSON object, got {scheme!r}")
    if scheme.get("input_activations") or scheme.get("output_activations"):
        raise ValueError(f"{where}: quantized activations are not supported; only weight-only schemes "
                         "(W8A16, W4A16) load")
    if scheme.get("targets") != ["Linear"]:
        raise ValueError(f"{where}: config group targets {scheme.get('targets')!r}; only [\"Linear\"] is supported")
    weight_format = _weight_format(scheme.get("weights"), f"{where}.config_groups.{group_name}.weights")
    storage = scheme.get("format") or data.get("format")
    expected = PACKED_FORMAT if weight_format.bits == 4 else INT_FORMAT
    if storage not in (INT_FORMAT, PACKED_FORMAT) or (weight_format.bits == 4 and storage != PACKED_FORMAT):
        raise ValueError(f"{where}: format {storage!r} cannot hold {weight_format.bits}-bit weights; "
                         f"expected '{expected}'")
    ignore = data.get("ignore") or []
    if not isinstance(ignore, list) or not all(name == LM_HEAD or names_routers_only(name) for name in ignore):
        raise ValueError(f"{where}: 'ignore' may name only '{LM_HEAD}' and a mixture-of-experts model's routers "
                         f"('model.layers.N.mlp.gate', 're:.*mlp.gate$'; every projection is quantized), "
                         f"got {ignore!r}")
    return CheckpointQuantization(weight_format, packed=storage == PACKED_FORMAT, quantize_lm_head=LM_HEAD not in ignore)


def names_routers_only(entry: Any) -> bool:
    """Whether an ``ignore`` entry names routers (which this engine never quantizes) and no projection."""
    if not isinstance(entry, str):
        return False
    if not entry.startswith(REGEX_PREFIX):
        return _ROUTER.fullmatch(entry) is not None
    try:
        pattern = re.compile(entry.removeprefix(REGEX_PREFIX))
    except re.error:
        return False
    return bool(pattern.match(_ROUTER_EXAMPLE)) and not any(pattern.match(name) for name in _PROJECTION_EXAMPLES)


def _weight_format(weights: Any, where: str) -> IntWeightFormat:
    if not isinstance(weights, dict):
        raise ValueError(f"{where} must be a JSON object, got {weights!r}")
    expected = {"type": "int", "symmetric": True}
    for key, value in expected.items():
        if weights.get(key) != value:
            raise ValueError(f"{where}.{key} is {weights.get(key)!r}; only {value!r} is supported")
    bits, strategy, group_size = weights.get("num_bits"), weights.get("strategy"), weights.get("group_size")
    if bits not in SUPPORTED_BITS:
        raise ValueError(f"{where}.num_bits is {bits!r}; supported: {', '.join(map(str, SUPPORTED_BITS))}")
    if strategy not in _STRATEGIES:
        raise ValueError(f"{where}.strategy is {strategy!r}; supported: {', '.join(_STRATEGIES)}")
    if strategy == "group" and (isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1):
        raise ValueError(f"{where}.group_size must be a positive integer for strategy 'group', got {group_size!r}")
    return IntWeightFormat(bits=bits, group_size=group_size if strategy == "group" else None)
