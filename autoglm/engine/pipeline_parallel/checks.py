"""What pipeline parallelism refuses before anything starts, read from the settings and the checkpoint's config."""
from __future__ import annotations

from autoglm.config import EngineConfig
from autoglm.distributed.stage_split import split_layers
from autoglm.models import ModelConfig


def check_pipeline_split(config: EngineConfig, model_config: ModelConfig) -> None:
    """A ValueError naming the model or setting that pipeline_parallel_size cannot work with."""
    stages = config.parallel.pipeline_parallel_size
    if stages == 1:
        return
    if config.speculative is not None:
        raise ValueError(f"speculative decoding (method '{config.speculative.method}') proposes from each token "
                         f"before the next step, which leaves the pipeline's stages idle: it needs "
                         f"pipeline_parallel_size 1, got {stages}; turn one of them off")
    if config.lora.enable_lora:
        raise ValueError(f"LoRA adapters are installed into one process's or one tensor-parallel group's layers for "
                         f"now: enable_lora needs pipeline_parallel_size 1, got {stages}")
    split_layers(model_config.num_hidden_layers, stages)
