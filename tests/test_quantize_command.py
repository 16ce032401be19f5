"""``autoglm quantize``: writes a compressed-tensors checkpoint the engine and transformers load, and reports its cost."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from autoglm.cli.main import main
from autoglm.models import ModelConfig
from autoglm.models.linear_method import WeightQuantization
from autoglm.models.linear_method.int_activation_weights import quantize_activations
from autoglm.models.linear_method.int_weights import IntWeightFormat
from autoglm.quantize.report import dequantized_copy
from tests.tiny_models import TOKENIZER_TEXT, make_tiny_checkpoint


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_tiny_checkpoint("llama", tmp_path_factory.mktemp("float"))


def test_int4_checkpoint_and_report(model_dir, tmp_path, capsys) -> None:
    calibration = tmp_path / "calibration.txt"
    calibration.write_text(TOKENIZER_TEXT)
    out, report_file = tmp_path / "int4", tmp_path / "report.json"
    assert main(["quantize", "--model", str(model_dir), "--out", str(out), "--method", "int4", "--group-size", "32",
                 "--report", "--calibration-text", str(calibration), "--output-json", str(report_file)]) == 0
    config = json.loads((out / "config.json").read_text())["quantization_config"]
    assert config["format"] == "pack-quantized" and config["ignore"] == ["lm_head"]
    assert ModelConfig.from_pretrained(out).quantization.weight_format == IntWeightFormat(4, 32)
    report = json.loads(report_file.read_text())
    errors = [layer["output_relative_error"] for layer in report["layers"]]
    assert len(errors) == 2 * 7 and errors == sorted(errors, reverse=True)  # q, k, v, o, gate, up, down per layer
    assert all(0 < layer["weight_relative_error"] < 0.2 for layer in report["layers"])  # 4 bits: ~2^-4 of the range
    assert report["before"]["num_characters"] == len(TOKENIZER_TEXT) and report["agreement"]["positions"] > 0
    printed = capsys.readouterr().out
    assert "perplexity per token:" in printed and "top-1 agreement" in printed
    assert printed.index(report["layers"][0]["name"]) < printed.index(report["layers"][-1]["name"])


def test_transformers_reads_the_written_int8_checkpoint_as_its_dequantized_weights(model_dir, tmp_path) -> None:
    out = tmp_path / "int8"
    assert main(["quantize", "--model", str(model_dir), "--out", str(out), "--method", "int8"]) == 0
    loaded = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    reference = dequantized_copy(AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32),
                                 WeightQuantization.from_settings("int8"))
    ids = torch.tensor([[5, 17, 42, 99, 3, 250]])
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, reference(ids).logits, atol=1e-4)


def test_bad_input_is_named(model_dir, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["quantize", "--model", str(model_dir), "--out", str(tmp_path / "x"), "--method", "int3"])
    assert "invalid choice: 'int3' (choose from 'int8', 'int4')" in capsys.readouterr().err
    assert main(["quantize", "--model", str(model_dir), "--out", str(tmp_path / "x"), "--method", "int4",
                 "--group-size", "48"]) == 2
    assert "layer 'model.layers.0.self_attn.q_proj': quantization group size 48 does not divide" in \
        capsys.readouterr().err


def test_the_w8a8_reference_rounds_each_quantized_layers_input_to_int8_per_token(model_dir) -> None:
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    weights_only = dequantized_copy(model, WeightQuantization.from_settings("int8"))
    with_activations = dequantized_copy(model, WeightQuantization.from_settings("w8a8"))
    x = torch.randn(3, model.config.hidden_size)
    projection = with_activations.model.layers[0].mlp.gate_proj
    q, scale = quantize_activations(x)
    with torch.no_grad():
        assert torch.equal(projection(x), F.linear(q * scale, projection.weight))
        assert torch.equal(projection.weight, weights_only.model.layers[0].mlp.gate_proj.weight)
        assert not torch.equal(projection(x), weights_only.model.layers[0].mlp.gate_proj(x))
