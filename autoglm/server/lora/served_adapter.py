"""An adapter as a served version: its base's engine, tokenizers and images, its own name, requests and
answer source, so routing, tenants, the response cache and the version operations treat it as a model."""
from __future__ import annotations

import logging
from dataclasses import replace
from http import HTTPStatus
from pathlib import Path

from autoglm.errors import LoRAAdapterNotFoundError
from autoglm.lora_request import LoRARequest
from autoglm.registry.checkpoint import adapter_sha256
from autoglm.server.observability.metrics import ServerMetrics
from autoglm.server.openai.errors import APIError
from autoglm.server.response_cache.source import AnswerSource
from autoglm.server.versions.served_version import OutcomeListener, ServedVersion, VersionState

logger = logging.getLogger(__name__)


def adapter_answer_source(base: AnswerSource, folder: Path) -> AnswerSource:
    """The base's answer source with the adapter's files in it (hashes the files: run it off the event loop)."""
    return replace(base, adapter_sha256=adapter_sha256(folder))


def require_lora(base: ServedVersion) -> None:
    """Refuse (400) to serve adapters on a model whose engine runs without LoRA."""
    if not base.engine.config.lora.enable_lora:
        raise APIError(HTTPStatus.BAD_REQUEST, f"{base.version_id} is served without LoRA adapters; start the "
                       "server with enable_lora to serve them", code="lora_not_enabled")


class ServedAdapter(ServedVersion):
    """`lora` is installed in `base`'s engine for as long as this is held; closing it unloads the adapter and
    leaves the base serving. The engine may evict an idle adapter to make room for another (max_cpu_loras):
    `prepare` installs it again before a request runs."""

    lora: LoRARequest

    def __init__(self, name: str, version: str, base: ServedVersion, lora: LoRARequest, answer_source: AnswerSource,
                 metrics: ServerMetrics, on_outcome: OutcomeListener | None = None) -> None:
        super().__init__(name, version, base.engine, base.tokenizers, answer_source, metrics, on_outcome,
                         base.images)
        self.base = base
        self.lora = lora

    async def prepare(self) -> None:
        await self.engine.add_lora(self.lora)  # loaded already: nothing to do

    async def close(self) -> None:
        """Unload the adapter from the base's engine (which lets any request still running on it finish)."""
        if self.engine.is_running:
            try:
                await self.engine.remove_lora(self.lora.lora_name)
            except LoRAAdapterNotFoundError:
                logger.debug("%s was already evicted from %s's engine", self.version_id, self.base.version_id)
        self.state = VersionState.UNLOADED
