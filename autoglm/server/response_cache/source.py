"""What produces a loaded version's answers, so that the response cache keeps apart the answers of two
deployments that share a cache and a served name but not their weights, files or numerics."""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from autoglm.engine.client import EngineClient
from autoglm.registry.checkpoint import files_sha256, weights_sha256

# Files beside the weights that change what the model writes: config.json (the architecture's numbers),
# generation_config.json (end-of-sequence ids), the tokenizer's files and the chat template.
_DESCRIPTION_SUFFIXES = (".json", ".jinja", ".model", ".txt", ".tiktoken")


@dataclass(frozen=True)
class AnswerSource:
    """Everything, besides the request, that fixes a deterministic answer. Speculative decoding is not here:
    it proposes tokens that the target model accepts only where it would have written them itself."""

    weights_sha256: str  # the registry's, else computed when the version loads
    files_sha256: str  # config, generation config, tokenizer and chat template files
    dtype: str  # what the model computes in
    linear_methods: str  # the projections' and the LM head's (a CPU kernel rounds as PyTorch's matmul does not)
    device: str
    quantization: str
    quantization_group_size: int | None
    quantize_lm_head: bool
    kv_cache_dtype: str
    tensor_parallel_size: int  # the split changes the order of the sums
    adapter_sha256: str | None = None  # a LoRA adapter's config and weights; None for the base model alone

    @functools.cached_property
    def digest(self) -> str:
        """A SHA-256 of every field, worked out once: each deterministic request's key takes it."""
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def description_files(folder: Path) -> list[Path]:
    """The folder's files that describe the model rather than hold its weights, by name."""
    return sorted((file for file in folder.iterdir() if file.is_file() and file.suffix in _DESCRIPTION_SUFFIXES),
                  key=lambda file: file.name)


def answer_source(engine: EngineClient, registered_sha256: str | None = None) -> AnswerSource:
    """The engine's answer source. Without the registry's checksum the weight files are hashed here, once
    per load (1-3 s a GB; see docs/MODELS.md)."""
    config = engine.config
    folders = [engine.model_path]
    if config.model.tokenizer is not None and Path(config.model.tokenizer).is_dir():
        folders.append(Path(config.model.tokenizer))
    return AnswerSource(
        weights_sha256=registered_sha256 or weights_sha256(engine.model_path),
        files_sha256=files_sha256([file for folder in folders for file in description_files(folder)]),
        dtype=str(engine.dtype),
        linear_methods=engine.linear_methods,
        device=engine.device_type,
        quantization=config.model.quantization,
        quantization_group_size=config.model.quantization_group_size,
        quantize_lm_head=config.model.quantize_lm_head,
        kv_cache_dtype=config.cache.kv_cache_dtype,
        tensor_parallel_size=config.parallel.tensor_parallel_size,
    )
