"""``bench quant-memory``: the bytes each layer and the whole model hold, float against int8 and int4, and its table."""
from __future__ import annotations

import json
import math

import pytest

from autoglm.bench.cli import main
from autoglm.bench.figures.render import render_document
from autoglm.bench.quant_memory.measure import ModelMemory
from tests.tiny_models import make_tiny_checkpoint

O_PROJ = "model.layers.0.self_attn.o_proj"


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    """A float32 checkpoint: the engine keeps float32 on every CPU, so the bytes below hold everywhere."""
    folder = tmp_path_factory.mktemp("memory")
    model = make_tiny_checkpoint("qwen2", folder / "model")  # untied LM head
    results = folder / "quant-memory.json"
    assert main(["quant-memory", "--model", str(model), "--group-size", "32", "--output-json", str(results)]) == 0
    return results


def variants(memory) -> dict[tuple[str, bool], ModelMemory]:
    return {(v["quantization"], v["quantize_lm_head"]): ModelMemory(**v)
            for v in json.loads(memory.read_text())["variants"]}


def test_each_layer_holds_its_integer_weights_and_scales(memory):
    by_variant = variants(memory)
    float_model, int8, int4 = by_variant["none", False], by_variant["int8", False], by_variant["int4", False]
    out_features = in_features = math.isqrt(float_model.layer_bytes[O_PROJ] // 4)  # a square float32 weight
    assert float_model.layer_bytes[O_PROJ] == 4 * out_features * in_features
    # int8: a byte a weight and a float32 scale per row (the fused op's view of it is the same memory)
    assert int8.layer_bytes[O_PROJ] == out_features * in_features + 4 * out_features
    # int4 in PyTorch's packing: half a byte a weight, a float32 scale and zero per group of 32
    assert int4.layer_bytes[O_PROJ] == out_features * in_features // 2 + 2 * 4 * out_features * in_features // 32
    assert int4.group_size == 32 and int8.group_size is None and float_model.quantized_layers == []


def test_the_lm_head_is_quantized_only_when_asked_and_the_total_follows(memory):
    by_variant = variants(memory)
    float_model = by_variant["none", False]
    for (method, head), variant in by_variant.items():
        if method == "none":
            continue
        assert ("lm_head" in variant.quantized_layers) == head
        assert len(variant.quantized_layers) == len(float_model.layer_bytes) - (0 if head else 1)
        saved = sum(float_model.layer_bytes[name] - variant.layer_bytes[name] for name in variant.quantized_layers)
        assert variant.total_bytes == float_model.total_bytes - saved  # the embedding untouched


def test_the_memory_table_compares_each_variant_with_the_float_model(memory):
    table = render_document(f"<!-- figures:quant-memory {memory.name} -->\n<!-- /figures -->\n", memory.parent)
    assert "| weights | quantized layers (MiB) | vs float |" in table
    assert "| float32 (checkpoint) |" in table and "| int4 (groups of 32), LM head quantized |" in table
    assert "| int8 (per channel), LM head float |" in table
