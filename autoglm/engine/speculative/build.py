"""The proposer a ``speculative_config`` names, built beside the target's parts."""
from __future__ import annotations

import logging
from dataclasses import replace

from autoglm.config import EngineConfig
from autoglm.engine.rank_model import load_rank_model
from autoglm.engine.setup import EngineParts
from autoglm.engine.speculative.draft_model import DraftModelProposer
from autoglm.engine.speculative.ngram import NgramProposer
from autoglm.engine.speculative.proposer import Proposer

logger = logging.getLogger(__name__)


def build_proposer(config: EngineConfig, parts: EngineParts) -> Proposer | None:
    spec = config.speculative
    if spec is None:
        return None
    if spec.method == "ngram":
        return NgramProposer(spec.prompt_lookup_min, spec.prompt_lookup_max)
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
