"""Per-parameter weight loaders: a whole tensor, or one shard of stacked projections into its rows."""
from __future__ import annotations

import pytest
import torch

from autoglm.models.parameters import (
    StackedRowsWeightLoader,
    WeightShapeError,
    checkpoint_parameter,
    default_weight_loader,
    stacked_rows_parameter,
)

QKV_SIZES = (8, 4, 4)  # q, then k and v of fewer heads


def test_a_plain_parameter_loads_the_whole_tensor_cast_to_its_dtype() -> None:
    parameter = checkpoint_parameter(3, 2, dtype=torch.float32)
    loaded = torch.arange(6, dtype=torch.bfloat16).view(3, 2)
    parameter.weight_loader(parameter, loaded)
    assert parameter.dtype == torch.float32 and torch.equal(parameter, loaded.float())
    assert parameter.weight_loader is default_weight_loader and not parameter.requires_grad


def test_a_plain_parameter_has_no_shards() -> None:
    parameter = checkpoint_parameter(3, 2)
    with pytest.raises(ValueError, match="shard 1 given for a parameter of one unsharded tensor"):
        parameter.weight_loader(parameter, torch.zeros(3, 2), 1)


def test_a_wrong_shape_reports_both_shapes() -> None:
    parameter = checkpoint_parameter(3, 2)
    with pytest.raises(WeightShapeError, match=r"shape \(2, 3\) cannot load into one of shape \(3, 2\)") as caught:
        parameter.weight_loader(parameter, torch.zeros(2, 3))
    assert (caught.value.loaded_shape, caught.value.expected_shape) == ((2, 3), (3, 2))


@pytest.mark.parametrize(("shard_id", "rows"), [(0, slice(0, 8)), (1, slice(8, 12)), (2, slice(12, 16))])
def test_each_shard_lands_in_its_rows_and_only_there(shard_id: int, rows: slice) -> None:
    parameter = stacked_rows_parameter(QKV_SIZES, 5)
    parameter.data.fill_(-1)
    shard = torch.randn(QKV_SIZES[shard_id], 5)
    parameter.weight_loader(parameter, shard, shard_id)
    assert torch.equal(parameter[rows], shard)
    untouched = torch.ones(16, dtype=torch.bool)
    untouched[rows] = False
    assert torch.all(parameter[untouched] == -1)


def test_stacked_shards_of_a_bias_fill_it_in_order() -> None:
    parameter = stacked_rows_parameter((3, 2))
    gate, up = torch.randn(3), torch.randn(2)
    parameter.weight_loader(parameter, up, 1)
    parameter.weight_loader(parameter, gate, 0)
    assert torch.equal(parameter, torch.cat((gate, up)))


def test_a_stacked_parameter_also_loads_whole() -> None:
    parameter = stacked_rows_parameter(QKV_SIZES, 5)
    fused = torch.randn(16, 5)
    parameter.weight_loader(parameter, fused)
    assert torch.equal(parameter, fused)


def test_a_shard_of_the_wrong_shape_reports_the_shards_shape() -> None:
    parameter = stacked_rows_parameter(QKV_SIZES, 5)
    with pytest.raises(WeightShapeError, match=r"shape \(8, 5\) cannot load into one of shape \(4, 5\)"):
        parameter.weight_loader(parameter, torch.zeros(8, 5), 1)


def test_a_shard_that_does_not_exist_names_the_ones_that_do() -> None:
    parameter = stacked_rows_parameter(QKV_SIZES, 5)
    with pytest.raises(ValueError, match="shard 3 does not exist; this parameter stacks shards 0 to 2"):
        StackedRowsWeightLoader(QKV_SIZES)(parameter, torch.zeros(4, 5), 3)
