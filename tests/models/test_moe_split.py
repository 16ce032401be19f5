"""A sparse block split over N ranks, each rank's part built and loaded in this process: the ranks' partial
outputs sum to the whole block's, with expert parallelism (shares of the experts whole, uneven where N does not
divide them) or without it (a slice of every expert), from per-expert or fused checkpoint names; a rank keeps
only its part of the weights, and never reads the other ranks' experts."""
from __future__ import annotations

import re

import pytest
import torch

from autoglm.models import loader, partition
from autoglm.models.expert_method import UnquantizedExpertMethod
from autoglm.models.fused_experts import ExpertPlacement, FusedExperts
from autoglm.models.loader import iter_checkpoint_tensors
from autoglm.models.linear_method import LinearMethods
from autoglm.models.model_config import ModelConfig
from autoglm.models.partition import partition_model
from autoglm.models.sparse_moe_block import SparseMoeBlock
from autoglm.models.weight_loading import load_checkpoint_weights
from tests.tiny_models import MOE_ARCHITECTURES, make_tiny_checkpoint, tiny_config

# Sizes that split two and three ways: 6 heads and KV heads, intermediate sizes 96 (dense) and 48 (each expert).
SPLITTABLE = {"num_attention_heads": 6, "num_key_value_heads": 6, "intermediate_size": 96,
              "moe_intermediate_size": 48}
NUM_TOKENS = 24
TOLERANCE = 1e-5


def test_shares_are_contiguous_and_one_apart_where_the_ranks_do_not_divide_the_experts():
    assert [ExpertPlacement.share(8, 3, rank).local_experts for rank in range(3)] == [(0, 1, 2), (3, 4, 5), (6, 7)]
    assert [ExpertPlacement.share(8, 2, rank).local_experts for rank in range(2)] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert [len(ExpertPlacement.share(128, 6, rank).local_experts) for rank in range(6)] == [22, 22, 21, 21, 21, 21]
    with pytest.raises(ValueError, match="share of 4 experts: need 1 <= ranks <= experts"):
        ExpertPlacement.share(4, 5, 0)


@pytest.fixture(scope="module", params=MOE_ARCHITECTURES)
def config(request, tmp_path_factory) -> ModelConfig:
    folder = tmp_path_factory.mktemp(request.param)
    tiny_config(request.param, **SPLITTABLE).save_pretrained(folder)
    return ModelConfig.from_pretrained(folder)


def block(config: ModelConfig, rank: int = 0, size: int = 1, expert_parallel: bool = False) -> SparseMoeBlock:
    return SparseMoeBlock(config, config.moe, LinearMethods().layers, UnquantizedExpertMethod(),
                          partition_model(config, rank, size, expert_parallel))


def fused_checkpoint(whole: SparseMoeBlock) -> dict[str, torch.Tensor]:
    """The whole block's weights under its own parameter names: every expert stacked, gate and up fused."""
    return {name: parameter.detach().clone() for name, parameter in whole.named_parameters()}


def per_expert_checkpoint(whole: SparseMoeBlock) -> dict[str, torch.Tensor]:
    """The same weights as a hub checkpoint names them: one tensor per expert and projection, gate apart from up."""
    weights = {name: tensor for name, tensor in fused_checkpoint(whole).items() if not name.startswith("experts.")}
    if whole.shared_experts is not None:
        gate, up = weights.pop("shared_experts.gate_up_proj.weight").chunk(2)
        weights.update({"shared_experts.gate_proj.weight": gate, "shared_experts.up_proj.weight": up})
    for expert in range(whole.experts.num_experts):
        gate, up = whole.experts.gate_up_proj[expert].detach().chunk(2)
        weights[f"experts.{expert}.gate_proj.weight"] = gate
        weights[f"experts.{expert}.up_proj.weight"] = up
        weights[f"experts.{expert}.down_proj.weight"] = whole.experts.down_proj[expert].detach()
    return weights


@pytest.fixture(scope="module")
def whole(config) -> SparseMoeBlock:
    torch.manual_seed(0)
    whole = block(config)
    for parameter in whole.parameters():
        parameter.data.normal_(0, 0.2)
    return whole


@pytest.mark.parametrize(("checkpoint", "size", "expert_parallel"), [
    pytest.param(per_expert_checkpoint, 2, True, id="experts-2-ways"),
    pytest.param(per_expert_checkpoint, 3, True, id="experts-3-3-2"),
    pytest.param(per_expert_checkpoint, 2, False, id="slices-2-ways"),
    pytest.param(per_expert_checkpoint, 3, False, id="slices-3-ways"),
    pytest.param(fused_checkpoint, 3, True, id="experts-3-3-2-fused-names"),
    pytest.param(fused_checkpoint, 2, False, id="slices-2-ways-fused-names"),
])
def test_the_ranks_partial_outputs_sum_to_the_whole_block(config, whole, checkpoint, size, expert_parallel):
    hidden = torch.randn(NUM_TOKENS, config.hidden_size, generator=torch.Generator().manual_seed(1))
    weights = checkpoint(whole)
    total = torch.zeros_like(hidden)
    for rank in range(size):
        part = block(config, rank, size, expert_parallel)
        load_checkpoint_weights(part, weights.items())  # every rank is given every tensor, and keeps its own
        total += part(hidden)  # one process: the block's all-reduce leaves this rank's partial sum
    torch.testing.assert_close(total, whole(hidden), atol=TOLERANCE, rtol=0)


def test_a_rank_holds_its_experts_whole_or_its_slice_of_every_expert(config, whole):
    weights = per_expert_checkpoint(whole)
    last = block(config, 2, 3, expert_parallel=True)
    assert last.experts.checkpoint_names_elsewhere() == {f"{expert}.{name}" for expert in range(6)
                                                         for name in ("gate_proj.weight", "up_proj.weight",
                                                                      "down_proj.weight")}
    load_checkpoint_weights(last, weights.items())
    assert torch.equal(last.experts.gate_up_proj, whole.experts.gate_up_proj[6:])
    assert torch.equal(last.experts.down_proj, whole.experts.down_proj[6:])
    second = block(config, 1, 2, expert_parallel=False)
    load_checkpoint_weights(second, weights.items())
    inner = slice(24, 48)
    gate, up = whole.experts.gate_up_proj.chunk(2, dim=1)
    assert torch.equal(second.experts.gate_up_proj, torch.cat((gate[:, inner], up[:, inner]), dim=1))
    assert torch.equal(second.experts.down_proj, whole.experts.down_proj[:, :, inner])
    assert torch.equal(second.gate.weight, whole.gate.weight)  # the router is whole on every rank


def test_partitions_refuse_what_cannot_split(config, tmp_path):
    with pytest.raises(ValueError, match=r"tensor_parallel_size \(9\) must be at most the model's 8 routed experts"):
        partition_model(config, 0, 9, expert_parallel=True)
    tiny_config("llama").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="enable_expert_parallel splits .* has none: turn it off"):
        partition_model(ModelConfig.from_pretrained(tmp_path), 0, 2, expert_parallel=True)


def test_a_rank_never_reads_the_other_ranks_experts_from_the_checkpoint(tmp_path, monkeypatch):
    model_dir = make_tiny_checkpoint("glm4_moe", tmp_path / "glm4_moe")
    monkeypatch.setattr(partition, "tp_rank", lambda: 1)  # built as rank 1 of 2 with expert parallelism
    monkeypatch.setattr(partition, "tp_size", lambda: 2)
    monkeypatch.setattr(partition, "expert_parallel", lambda: True)
    read = []

    def recording(files, skipped=()):
        for name, tensor in iter_checkpoint_tensors(files, skipped):
            read.append(name)
            yield name, tensor

    monkeypatch.setattr(loader, "iter_checkpoint_tensors", recording)
    model, _ = loader.load_model(model_dir, torch.float32, torch.device("cpu"))
    assert {module.placement.local_experts for module in model.modules() if isinstance(module, FusedExperts)} == {
        (4, 5, 6, 7)}
    assert any(".mlp.experts.4." in name for name in read)
    assert not [name for name in read if re.search(r"\.mlp\.experts\.[0-3]\.", name)]
