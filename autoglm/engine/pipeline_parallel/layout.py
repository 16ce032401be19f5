"""Where each rank of a pipeline-parallel engine sits: rank = stage * T + tensor-parallel rank.

The ranks of one stage are consecutive and form its tensor-parallel group. The engine's own process
is the last stage's first rank: it samples, so the step's tokens never travel back.
"""
from __future__ import annotations

from dataclasses import dataclass

from autoglm.engine.tensor_parallel.process_group import GroupSettings


@dataclass(frozen=True)
class RankLayout:
    num_stages: int
    tp_size: int

    @classmethod
    def of(cls, settings: GroupSettings) -> RankLayout:
        stages = settings.pipeline_parallel_size
        if stages < 1 or settings.world_size % stages:
            raise ValueError(f"{settings.world_size} ranks do not split into {stages} pipeline stages")
        return cls(stages, settings.world_size // stages)

    @property
    def world_size(self) -> int:
        return self.num_stages * self.tp_size

    def rank(self, stage: int, tp_rank: int) -> int:
        return stage * self.tp_size + tp_rank

    def stage_of(self, rank: int) -> int:
        return rank // self.tp_size

    def tp_rank_of(self, rank: int) -> int:
        return rank % self.tp_size

    @property
    def engine_rank(self) -> int:
        return self.rank(self.num_stages - 1, 0)

    def stage_ranks(self, stage: int) -> list[int]:
        """The tensor-parallel group of ``stage``."""
        return [self.rank(stage, tp_rank) for tp_rank in range(self.tp_size)]

    def neighbours(self, rank: int) -> tuple[int | None, int | None]:
        """The ranks ``rank`` reads its stream from and sends it to: the same tensor-parallel rank of the stages
        before and after (None past either end)."""
        stage, tp_rank = self.stage_of(rank), self.tp_rank_of(rank)
        previous = self.rank(stage - 1, tp_rank) if stage > 0 else None
        following = self.rank(stage + 1, tp_rank) if stage < self.num_stages - 1 else None
        return previous, following

    def describe(self, rank: int) -> str:
        tp = f", tensor-parallel rank {self.tp_rank_of(rank)}" if self.tp_size > 1 else ""
        return f"pipeline stage {self.stage_of(rank)}{tp} (rank {rank})"


def engine_rank(settings: GroupSettings) -> int:
    """The rank the engine's process joins as: 0 under tensor parallelism alone."""
    return RankLayout.of(settings).engine_rank


def describe_rank(settings: GroupSettings, rank: int) -> str:
    """A worker as an error names it."""
    if settings.pipeline_parallel_size == 1:
        return f"tensor-parallel worker rank {rank}"
    return RankLayout.of(settings).describe(rank)
