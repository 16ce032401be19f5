"""Whether an engine pools, and what its model pools into: read from the settings and the checkpoint folder."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from transformers import PreTrainedTokenizerBase

from autoglm.config.pooling import PoolingConfig
from autoglm.models.model_config import ModelConfig
from autoglm.models.pooling_models import SEQUENCE_CLASSIFIERS, is_base_model_architecture

# sentence-transformers' Pooling module: its config's flags, and the pooling type each names.
_SENTENCE_TRANSFORMERS_MODES = {
    "pooling_mode_lasttoken": "LAST",
    "pooling_mode_mean_tokens": "MEAN",
    "pooling_mode_cls_token": "CLS",
}
_POOLING_MODULE = "sentence_transformers.models.Pooling"

ModelKind = Literal["embed", "classify", "token_pair"]


@dataclass(frozen=True)
class PoolingModel:
    """What a pooling engine's model makes of a prompt.

    ``kind`` "embed": a vector of the hidden states (``pooling_type``); "classify": a sequence classifier's
    ``num_labels`` logits at the last token; "token_pair": the logit of ``token_pair[1]`` minus that of
    ``token_pair[0]`` at the last token (a yes/no reranker), one score.
    """

    kind: ModelKind
    pooling_type: str
    normalize: bool
    num_labels: int = 1
    token_pair: tuple[int, int] | None = None
    matryoshka_dimensions: tuple[int, ...] | None = None

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks it runs: an embedding model embeds (a caller scores a pair by the cosine of two embeddings);
        the others classify, and score where they make one logit."""
        if self.kind == "embed":
            return ("embed",)
        return ("classify", "score") if self.num_labels == 1 else ("classify",)


def sentence_transformers_pooling(model_path: Path) -> str | None:
    """The pooling type the folder's sentence-transformers Pooling module names; None where it has none."""
    pooling_dir = "1_Pooling"
    modules_file = model_path / "modules.json"
    if modules_file.is_file():
        modules = json.loads(modules_file.read_text())
        pooling_dir = next((module.get("path", pooling_dir) for module in modules if isinstance(module, dict)
                            and module.get("type") == _POOLING_MODULE), pooling_dir)
    config_file = model_path / pooling_dir / "config.json"
    if not config_file.is_file():
        return None
    flags = json.loads(config_file.read_text())
    return next((kind for flag, kind in _SENTENCE_TRANSFORMERS_MODES.items() if flags.get(flag)), None)


def checkpoint_pools(model_path: Path, model_config: ModelConfig) -> bool:
    """Whether the checkpoint says it embeds or classifies rather than generates."""
    architecture = model_config.architecture
    return (architecture in SEQUENCE_CLASSIFIERS or is_base_model_architecture(architecture)
            or (model_path / "modules.json").is_file() or sentence_transformers_pooling(model_path) is not None)


def engine_pools(config: PoolingConfig, model_path: Path, model_config: ModelConfig) -> bool:
    """The ``runner`` setting resolved; a generating engine refused for a classifier, which cannot generate."""
    if config.runner == "generate":
        if model_config.architecture in SEQUENCE_CLASSIFIERS:
            raise ValueError(f"{model_config.architecture} is a sequence classifier, which cannot generate: "
                             "set runner to 'pooling' or 'auto'")
        return False
    pools = (config.runner == "pooling" or config.classifier_from_token is not None
             or checkpoint_pools(model_path, model_config))
    if pools and model_config.vision is not None:
        raise ValueError(f"{model_config.architecture} takes images, which pooling does not: set runner to 'generate'")
    return pools


def pooling_model(config: PoolingConfig, model_path: Path, model_config: ModelConfig,
                  tokenizer: PreTrainedTokenizerBase) -> PoolingModel:
    """What the pooling engine's model makes of a prompt, from the settings, then the checkpoint."""
    matryoshka = config.matryoshka_dimensions or _matryoshka(model_path)
    if config.classifier_from_token is not None:
        if model_config.architecture in SEQUENCE_CLASSIFIERS:
            raise ValueError(f"classifier_from_token scores a causal LM by two of its vocabulary's logits, but "
                             f"{model_config.architecture} has a classifier head instead: unset it")
        pair = tuple(_single_token_id(tokenizer, token) for token in config.classifier_from_token)
        return PoolingModel("token_pair", "LAST", False, 1, pair)
    if model_config.architecture in SEQUENCE_CLASSIFIERS:
        return PoolingModel("classify", "LAST", False, model_config.num_labels)
    pooling_type = config.pooling_type or sentence_transformers_pooling(model_path) or "LAST"
    return PoolingModel("embed", pooling_type, config.normalize, matryoshka_dimensions=matryoshka)


def _matryoshka(model_path: Path) -> tuple[int, ...] | None:
    """The embedding sizes the checkpoint's config.json says it was trained to truncate to, if any."""
    config_file = model_path / "config.json"
    sizes = json.loads(config_file.read_text()).get("matryoshka_dimensions") if config_file.is_file() else None
    if isinstance(sizes, list) and sizes and all(type(size) is int and size > 0 for size in sizes):
        return tuple(sizes)
    return None


def _single_token_id(tokenizer: PreTrainedTokenizerBase, token: str) -> int:
    ids = tokenizer.encode(token, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"classifier_from_token: {token!r} is {len(ids)} tokens in this tokenizer; give tokens that "
                         "are one token each (Qwen3-Reranker's are 'no' and 'yes')")
    return ids[0]
