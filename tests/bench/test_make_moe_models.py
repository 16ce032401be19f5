"""``autoglm bench make-model``'s mixture-of-experts shapes: folders transformers loads and runs, seeded router
corrections, GLM's multi-token prediction layer after the decoder, and Qwen3-30B-A3B's published size."""
from __future__ import annotations

import json

import pytest
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.modeling_layers import MtpModel

from autoglm.bench.cli import main
from autoglm.bench.make_model.checkpoint import make_model, shape_config
from autoglm.bench.make_model.extra_shard import add_shard
from autoglm.bench.make_model.random_weights import build_random_model

# shape: (architecture, the index of each decoder layer whose MLP is dense rather than experts)
TINY_SHAPES = {"qwen3-moe-tiny": ("Qwen3MoeForCausalLM", {1}), "glm4.5-air-tiny": ("Glm4MoeForCausalLM", {0})}
MTP_OWN_TENSORS = {"eh_proj.weight": [64, 128], "enorm.weight": [64], "hnorm.weight": [64],
                   "shared_head.norm.weight": [64], "embed_tokens.weight": [384, 64],
                   "shared_head.head.weight": [384, 64]}
INDEX = "model.safetensors.index.json"


def make(shape: str, out, *arguments: str) -> None:
    main(["make-model", "--shape", shape, *arguments, "--out", str(out)])


def stored_tensors(folder) -> dict[str, tuple[str, torch.Tensor]]:
    """Every tensor of a sharded checkpoint, with the shard that holds it."""
    weight_map = json.loads((folder / INDEX).read_text())["weight_map"]
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        with safe_open(folder / shard, framework="pt") as file:
            tensors |= {name: (shard, file.get_tensor(name)) for name in file.keys()}
    assert set(tensors) == set(weight_map) and all(weight_map[name] == shard for name, (shard, _) in tensors.items())
    return tensors


def layer_tensors(tensors: dict[str, tuple[str, torch.Tensor]], index: int) -> dict[str, torch.Tensor]:
    prefix = f"model.layers.{index}."
    return {name.removeprefix(prefix): tensor for name, (_, tensor) in tensors.items() if name.startswith(prefix)}


@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory):
    """Each tiny shape's folder in float32 with seed 0, written once for the module."""
    folders = {}

    def folder(shape: str):
        if shape not in folders:
            folders[shape] = tmp_path_factory.mktemp(shape)
            make(shape, folders[shape], "--dtype", "float32")
        return folders[shape]

    return folder


@pytest.fixture(params=list(TINY_SHAPES))
def tiny_folder(request, tiny_folders):
    return request.param, tiny_folders(request.param)


@pytest.fixture
def glm_folder(tiny_folders):
    return tiny_folders("glm4.5-air-tiny")


def test_tiny_folder_loads_in_transformers_and_runs(tiny_folder):
    shape, folder = tiny_folder
    architecture, dense_layers = TINY_SHAPES[shape]
    model = AutoModelForCausalLM.from_pretrained(folder)
    assert type(model).__name__ == architecture and model.dtype == torch.float32
    assert {index for index, layer in enumerate(model.model.layers) if not hasattr(layer.mlp, "experts")} \
        == dense_layers
    logits = model(torch.tensor([[1, 7, 42, 200, 383]])).logits
    assert logits.shape == (1, 5, 384) and bool(torch.isfinite(logits).all())


def test_tiny_token_ids_are_inside_the_vocabulary(tiny_folder):
    _, folder = tiny_folder
    config = json.loads((folder / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(folder)
    end_ids = config["eos_token_id"] if isinstance(config["eos_token_id"], list) else [config["eos_token_id"]]
    assert tokenizer.eos_token_id == end_ids[0]
    assert all(0 <= token_id < config["vocab_size"] for token_id in end_ids)
    assert len(tokenizer) <= config["vocab_size"]


def test_glm_ends_a_turn_on_its_end_token_or_the_next_role(glm_folder):
    config = json.loads((glm_folder / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(glm_folder)
    assert tokenizer.convert_ids_to_tokens(config["eos_token_id"]) == ["<|endoftext|>", "<|user|>", "<|observation|>"]
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                           add_generation_prompt=True)
    assert tokenizer.encode(prompt, add_special_tokens=False)[0] == config["eos_token_id"][1]


def test_router_score_correction_is_seeded_and_nonzero(glm_folder):
    config = shape_config("glm4.5-air-tiny")

    def corrections(seed: int) -> torch.Tensor:
        model = build_random_model(config, torch.float32, torch.Generator().manual_seed(seed))
        return torch.stack([layer.mlp.gate.e_score_correction_bias for layer in model.model.layers[1:]])

    first, again, other = corrections(0), corrections(0), corrections(1)
    assert bool((first != 0).all()) and 0 < float(first.abs().max()) < 0.2
    assert torch.equal(first, again) and not torch.equal(first, other)
    loaded = AutoModelForCausalLM.from_pretrained(glm_folder)  # written with seed 0
    assert torch.equal(torch.stack([layer.mlp.gate.e_score_correction_bias for layer in loaded.model.layers[1:]]),
                       first)


def test_glm_mtp_layer_follows_the_decoder_in_a_shard_of_its_own(glm_folder):
    tensors = stored_tensors(glm_folder)
    assert sorted(set(shard for shard, _ in tensors.values())) == [
        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    mtp, last_decoder_layer = layer_tensors(tensors, 3), layer_tensors(tensors, 2)
    assert {name for name, (shard, _) in tensors.items() if shard.startswith("model-00002")} \
        == {f"model.layers.3.{name}" for name in mtp}
    assert {name: list(mtp[name].shape) for name in MTP_OWN_TENSORS} == MTP_OWN_TENSORS
    block = {name: (tensor.shape, tensor.dtype) for name, tensor in mtp.items() if name not in MTP_OWN_TENSORS}
    assert block == {name: (tensor.shape, tensor.dtype) for name, tensor in last_decoder_layer.items()}
    assert {"mlp.experts.7.gate_proj.weight", "mlp.shared_experts.up_proj.weight", "mlp.gate.e_score_correction_bias",
            "self_attn.q_proj.bias"} <= block.keys()
    assert torch.equal(mtp["embed_tokens.weight"], tensors["model.embed_tokens.weight"][1])
    assert torch.equal(mtp["shared_head.head.weight"], tensors["lm_head.weight"][1])
    assert all(bool((mtp[name] == 1).all()) for name in ("enorm.weight", "hnorm.weight", "shared_head.norm.weight"))
    assert not torch.equal(mtp["mlp.gate.weight"], last_decoder_layer["mlp.gate.weight"])


def test_glm_mtp_layer_moves_with_layers_and_keeps_the_dtypes(tmp_path):
    make("glm4.5-air-tiny", tmp_path, "--layers", "1")  # bfloat16: the router stays float32, as transformers keeps it
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["num_hidden_layers"] == 1 and config["num_nextn_predict_layers"] == 1
    tensors = stored_tensors(tmp_path)
    assert not layer_tensors(tensors, 2)
    mtp = layer_tensors(tensors, 1)
    assert MTP_OWN_TENSORS.keys() <= mtp.keys() and "mlp.experts.0.down_proj.weight" in mtp  # the first layer is dense
    assert {name for name, tensor in mtp.items() if tensor.dtype == torch.float32} == {
        "mlp.gate.weight", "mlp.gate.e_score_correction_bias"}
    assert tensors["model.layers.0.mlp.gate_proj.weight"][1].dtype == torch.bfloat16


def test_transformers_own_mtp_loader_reads_the_mtp_layer(tmp_path):
    # transformers loads GLM's MTP layer only where GLM-4.5-Air keeps it: after 46 decoder layers.
    make("glm4.5-air-tiny", tmp_path, "--layers", "46", "--dtype", "float32")
    model = AutoModelForCausalLM.from_pretrained(tmp_path)
    mtp_layer = MtpModel.from_pretrained(model).layers[0]
    stored = layer_tensors(stored_tensors(tmp_path), 46)
    loaded = {"eh_proj.weight": mtp_layer.eh_proj.weight, "enorm.weight": mtp_layer.enorm.weight,
              "shared_head.norm.weight": mtp_layer.post_norm.weight,
              "self_attn.k_proj.bias": mtp_layer.mtp_block.self_attn.k_proj.bias,
              "mlp.experts.5.up_proj.weight": mtp_layer.mtp_block.mlp.experts.gate_up_proj[5, 32:],
              "mlp.gate.e_score_correction_bias": mtp_layer.mtp_block.mlp.gate.e_score_correction_bias}
    assert all(torch.equal(tensor, stored[name]) for name, tensor in loaded.items())


def test_negative_mtp_layer_count_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="num_nextn_predict_layers must be 0 or more, got -1"):
        make_model("glm4.5-air-tiny", tmp_path / "out", overrides={"num_nextn_predict_layers": -1})
    assert not (tmp_path / "out").exists()


def test_add_shard_renumbers_a_sharded_checkpoint_and_indexes_the_new_shard(tmp_path):
    shards = {"model-00001-of-00002.safetensors": {"a": torch.zeros(3)},
              "model-00002-of-00002.safetensors": {"b": torch.zeros(2, 2, dtype=torch.bfloat16)}}
    for shard, tensors in shards.items():
        save_file(tensors, tmp_path / shard)
    (tmp_path / INDEX).write_text(json.dumps({"metadata": {"total_parameters": 7, "total_size": 20},
                                              "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                             "b": "model-00002-of-00002.safetensors"}}))
    new_shard = add_shard(tmp_path, {"c": torch.ones(5, dtype=torch.float16)})
    assert new_shard == tmp_path / "model-00003-of-00003.safetensors"
    assert sorted(path.name for path in tmp_path.glob("*.safetensors")) == [
        "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"]
    index = json.loads((tmp_path / INDEX).read_text())
    assert index == {"metadata": {"total_parameters": 7, "total_size": 12 + 8 + 10},
                     "weight_map": {"a": "model-00001-of-00003.safetensors", "b": "model-00002-of-00003.safetensors",
                                    "c": "model-00003-of-00003.safetensors"}}
    assert {name: shard for name, (shard, _) in stored_tensors(tmp_path).items()} == index["weight_map"]


# ---- qwen3-30b-a3b: the published size ------------------------------------------------
def test_qwen3_30b_a3b_has_the_published_config():
    config = shape_config("qwen3-30b-a3b", {"num_hidden_layers": 2})  # what --layers 2 sets
    assert config.architectures == ["Qwen3MoeForCausalLM"] and config.num_hidden_layers == 2
    assert (config.hidden_size, config.intermediate_size, config.moe_intermediate_size, config.num_attention_heads,
            config.num_key_value_heads, config.head_dim, config.vocab_size) == (2048, 6144, 768, 32, 4, 128, 151936)
    assert (config.num_experts, config.num_experts_per_tok, config.norm_topk_prob, config.decoder_sparse_step,
            config.mlp_only_layers) == (128, 8, True, 1, [])
    assert (config.rope_parameters["rope_theta"], config.max_position_embeddings, config.rms_norm_eps,
            config.tie_word_embeddings, config.bos_token_id, config.eos_token_id) == (
        1_000_000, 40960, 1e-6, False, 151643, 151645)


def test_qwen3_30b_a3b_has_the_published_parameter_counts():
    config = shape_config("qwen3-30b-a3b")
    with torch.device("meta"):  # shapes only: nothing is allocated
        model = transformers.Qwen3MoeForCausalLM(config)
    count = lambda module: sum(parameter.numel() for parameter in module.parameters())  # noqa: E731
    hidden, experts, routed = 2048, 128, 8
    expert = 3 * hidden * 768
    attention = hidden * 32 * 128 * 2 + hidden * 4 * 128 * 2 + 2 * 128  # q, o; k, v; q and k norms
    layer = attention + experts * hidden + experts * expert + 2 * hidden  # the router, the experts, two norms
    assert count(model.model.layers[0]) == layer and count(model.model.layers[0].mlp.experts) == experts * expert
    total = count(model)
    assert total == 48 * layer + 2 * 151936 * hidden + hidden
    active = total - 48 * (experts - routed) * expert
    assert round(total / 1e9, 1) == 30.5 and 3.3e9 < active < 3.4e9  # as published: 30.5B, 3.3B active
