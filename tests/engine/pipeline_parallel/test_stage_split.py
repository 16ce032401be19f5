"""How layers split into stages and ranks into stages and tensor-parallel groups: no process is started."""
from __future__ import annotations

import pytest

from autoglm.distributed import pipeline_state
from autoglm.distributed.stage_split import split_layers
from autoglm.engine.pipeline_parallel.layout import RankLayout, describe_rank, engine_rank
from autoglm.engine.tensor_parallel.process_group import GroupSettings


@pytest.mark.parametrize(("num_layers", "num_stages", "sizes"), [
    (4, 2, [2, 2]), (5, 2, [3, 2]), (7, 3, [3, 2, 2]), (10, 4, [3, 3, 2, 2]), (3, 3, [1, 1, 1]), (6, 1, [6])])
def test_stages_hold_contiguous_runs_the_first_ones_longer(num_layers, num_stages, sizes):
    stages = split_layers(num_layers, num_stages)
    assert [len(stage) for stage in stages] == sizes
    assert [layer for stage in stages for layer in stage] == list(range(num_layers))


@pytest.mark.parametrize(("num_layers", "num_stages", "message"), [
    (4, 5, "more than the model's 4 decoder layers; allowed: 1 to 4"), (4, 0, "at least 1")])
def test_a_split_that_leaves_a_stage_empty_is_refused(num_layers, num_stages, message):
    with pytest.raises(ValueError, match=message):
        split_layers(num_layers, num_stages)


def test_two_stages_of_two_tensor_parallel_ranks_are_laid_out_stage_by_stage():
    settings = GroupSettings("gloo", "tcp://127.0.0.1:1", 4, "cpu", pipeline_parallel_size=2)
    layout = RankLayout.of(settings)
    assert (layout.num_stages, layout.tp_size) == (2, 2)
    assert [layout.stage_ranks(stage) for stage in range(2)] == [[0, 1], [2, 3]]
    assert engine_rank(settings) == 2  # the last stage's first rank samples
    assert [layout.neighbours(rank) for rank in range(4)] == [(None, 2), (None, 3), (0, None), (1, None)]
    assert describe_rank(settings, 1) == "pipeline stage 0, tensor-parallel rank 1 (rank 1)"


def test_tensor_parallelism_alone_keeps_the_engine_on_rank_zero():
    settings = GroupSettings("gloo", "tcp://127.0.0.1:1", 2, "cpu")
    assert engine_rank(settings) == 0
    assert describe_rank(settings, 1) == "tensor-parallel worker rank 1"


def test_the_pool_is_sized_by_the_stage_with_the_most_layers(monkeypatch):
    """The last of two stages over five layers holds two; the first, three, bounds every stage's block count."""
    monkeypatch.setattr(pipeline_state, "_stage", pipeline_state.PipelineStage(1, 2, 0, None))
    assert pipeline_state.stage_layers(5) == range(3, 5)
    assert pipeline_state.busiest_stage_bytes(2 * 100, 5) == 3 * 100
    monkeypatch.setattr(pipeline_state, "_stage", None)
    assert pipeline_state.busiest_stage_bytes(5 * 100, 5) == 5 * 100
