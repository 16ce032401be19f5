"""The proposer a ``speculative_config`` names, built beside the target's parts."""
from __future__ import annotations

import logging
from dataclasses import replace

from autoglm.config import EngineConfig
from autoglm.engine.rank_model import load_rank_model
from autoglm.engine.setup import EngineParts
from autoglm.engine.speculative.draft_model import DraftModelProposer
from autoglm.engine.speculative.mtp import MtpProposer
from autoglm.engine.speculative.ngram import NgramProposer
from autoglm.engine.speculative.proposer import Proposer
from autoglm.models.glm4_mtp import load_mtp_layer
from autoglm.runner.model_runner import ModelRunner

logger = logging.getLogger(__name__)


def build_proposer(config: EngineConfig, parts: EngineParts) -> Proposer | None:
    spec = config.speculative
    if spec is None:
        return None
    if spec.method == "ngram":
        return NgramProposer(spec.prompt_lookup_min, spec.prompt_lookup_max)
    if spec.method == "mtp":
        return _mtp_proposer(config, parts)
    # The draft's own weights, unquantized, with a KV pool as large as the target's: same block ids.
    draft_model = replace(config.model, model=spec.model, quantization="none", quantization_group_size=None)
    draft_config = replace(config, model=draft_model, speculative=None)
    logger.info("loading the draft model from %s", spec.model)
    draft = load_rank_model(draft_config, parts.device)
    if draft.model_config.vocab_size != parts.model_config.vocab_size:
        raise ValueError(f"speculative_config: the draft model {spec.model} has a vocabulary of "
                         f"{draft.model_config.vocab_size} tokens but the target's has "
                         f"{parts.model_config.vocab_size}; a draft must share the target's tokenizer")
    return DraftModelProposer(draft.runner(config.cache.block_size, parts.num_blocks), config.cache.block_size,
                              parts.eos_token_ids)


def _mtp_proposer(config: EngineConfig, parts: EngineParts) -> MtpProposer:
    """The checkpoint's own prediction layer, computed as the target's layers are."""
    if not isinstance(parts.runner, ModelRunner):
        raise ValueError("speculative method 'mtp' runs in one process; set tensor_parallel_size to 1")
    logger.info("loading the multi-token prediction layer from %s", parts.model_path)
    layer = load_mtp_layer(parts.model_path, parts.model_config, parts.dtype, parts.device, parts.linear_methods)
    return MtpProposer(layer, parts.runner, parts.dtype, parts.num_blocks, config.cache.block_size,
                       parts.eos_token_ids)
