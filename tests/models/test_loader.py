"""Loading checkpoint folders: sharded files, target dtype, and errors that name the path."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from autoglm.models import SUPPORTED_ARCHITECTURES, ModelConfig, load_model, resolve_dtype
from tests.models.logit_parity import engine_logprobs, max_logprob_difference, prompt_ids
from tests.tiny_models import make_tiny_checkpoint

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> Path:
    return make_tiny_checkpoint("llama", tmp_path_factory.mktemp("llama"))


def test_sharded_checkpoint_loads(tmp_path: Path) -> None:
    model_dir = make_tiny_checkpoint("qwen3", tmp_path, max_shard_size="40KB")
    assert (model_dir / "model.safetensors.index.json").is_file()
    assert len(list(model_dir.glob("*.safetensors"))) > 1
    assert max_logprob_difference(model_dir) < 1e-4


@pytest.mark.cpu_isa
def test_bfloat16_is_close_to_float32(llama_dir: Path) -> None:
    model, _ = load_model(llama_dir, torch.bfloat16, CPU)
    assert {parameter.dtype for parameter in model.parameters()} == {torch.bfloat16}

    input_ids = prompt_ids(320)
    positions = torch.arange(len(input_ids))
    low = engine_logprobs(llama_dir, input_ids, positions, torch.bfloat16)
    full = engine_logprobs(llama_dir, input_ids, positions, torch.float32)
    assert low.dtype == torch.float32
    assert (low - full).abs().max().item() < 0.25
    assert (low.argmax(-1) == full.argmax(-1)).float().mean().item() >= 0.9


def test_model_is_built_in_the_target_dtype_without_changing_the_default(llama_dir: Path) -> None:
    model, config = load_model(llama_dir, torch.float16, CPU)
    assert torch.get_default_dtype() == torch.float32
    assert model.model.embed_tokens.weight.dtype == torch.float16
    assert model.model.rotary_emb.inv_freq.dtype == torch.float32
    assert config.architecture == "LlamaForCausalLM"


def test_resolve_dtype(tmp_path: Path) -> None:
    model_dir = make_tiny_checkpoint("glm4", tmp_path, dtype=torch.bfloat16)
    config = ModelConfig.from_pretrained(model_dir)
    assert resolve_dtype("auto", config) == torch.bfloat16
    assert resolve_dtype("float16", config) == torch.float16
    assert resolve_dtype("float32", config) == torch.float32
    model, _ = load_model(model_dir, resolve_dtype("auto", config), CPU)
    assert model.model.layers[0].mlp.gate_up_proj.weight.dtype == torch.bfloat16


def test_resolve_dtype_errors(llama_dir: Path) -> None:
    config = ModelConfig.from_pretrained(llama_dir)
    with pytest.raises(
        ValueError, match="unknown dtype 'int8'; choose one of: auto, float32, float, float16"
    ):
        resolve_dtype("int8", config)
    fp8 = ModelConfig.from_dict(
        {**json.loads((llama_dir / "config.json").read_text()), "dtype": "float8_e4m3fn"}
    )
    with pytest.raises(ValueError, match="checkpoint's dtype 'float8_e4m3fn' is not supported"):
        resolve_dtype("auto", fp8)


def test_unsupported_architecture_lists_supported_ones(llama_dir: Path, tmp_path: Path) -> None:
    config = json.loads((llama_dir / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "architectures": ["MistralForCausalLM"]}))
    with pytest.raises(ValueError, match="unsupported model architecture 'MistralForCausalLM'") as caught:
        load_model(tmp_path, torch.float32, CPU)
    assert all(name in str(caught.value) for name in SUPPORTED_ARCHITECTURES)


def test_missing_folder_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match=f"model folder {missing} does not exist"):
        load_model(missing, torch.float32, CPU)


def test_missing_config_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "config.json")):
        load_model(tmp_path, torch.float32, CPU)


def test_missing_weights_are_named(llama_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((llama_dir / "config.json").read_text())
    with pytest.raises(
        FileNotFoundError, match=f"no \\*.safetensors weight files in model folder {tmp_path}"
    ):
        load_model(tmp_path, torch.float32, CPU)


def test_missing_shard_is_named(tmp_path: Path) -> None:
    model_dir = make_tiny_checkpoint("qwen2", tmp_path, max_shard_size="40KB")
    shard = sorted(model_dir.glob("*.safetensors"))[-1]
    shard.unlink()
    with pytest.raises(FileNotFoundError, match=f"weight file {shard} named by"):
        load_model(model_dir, torch.float32, CPU)
