"""One loaded model version: its engine, its tokenizer workers, and the requests it has taken in."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from enum import Enum

from autoglm.engine.client import EngineClient
from autoglm.lora_request import LoRARequest
from autoglm.server.media.prompt_images import PromptImages
from autoglm.server.observability.metrics import ServerMetrics
from autoglm.server.versions.version_ids import version_id
from autoglm.server.response_cache.source import AnswerSource
from autoglm.server.openai.tokenizer_pool import TokenizerPool
from autoglm.server.observability.tracking import RequestOutcome, RequestTracker

logger = logging.getLogger(__name__)

class VersionState(str, Enum):
    """Where a version is in its life, as /admin/models reports it."""

    LOADING = "loading"
    LOADED = "loaded"  # takes the requests routed to it
    DRAINING = "draining"  # takes no new request; unloads when its last one ends
    UNLOADED = "unloaded"


OutcomeListener = Callable[["ServedVersion", RequestOutcome], None]


class ServedVersion:
    """A request that `take`s this version finishes on it, whatever routing does meanwhile; `retire` unloads
    the version once every request it took has ended. `images` reads a vision model's images; None for a
    text-only model.

    `version` is empty on a server without a registry, where the one model is known by its name alone;
    `answer_source` (weights, files, numerics) tells apart deployments of one name all the same. `lora` is the
    adapter the version's requests run with: None for a model (see ``ServedAdapter`` for an adapter's).
    """

    lora: LoRARequest | None = None

    def __init__(self, name: str, version: str, engine: EngineClient, tokenizers: TokenizerPool,
                 answer_source: AnswerSource, metrics: ServerMetrics,
                 on_outcome: OutcomeListener | None = None, images: PromptImages | None = None) -> None:
        self.name = name
        self.version = version
        self.version_id = version_id(name, version)
        self.engine = engine
        self.tokenizers = tokenizers
        self.images = images
        self.answer_source = answer_source
        self.state = VersionState.LOADED
        self._metrics = metrics
        self._on_outcome = on_outcome
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def in_flight(self) -> int:
        """Requests taken in and not ended, those still tokenizing included."""
        return self._in_flight

    def take(self, tracker: RequestTracker) -> None:
        """Serve `tracker`'s request here: it counts as in flight until the tracker finishes."""
        self._in_flight += 1
        self._idle.clear()
        tracker.served_by(self.version_id, self._ended)

    def _ended(self, outcome: RequestOutcome) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self._idle.set()
        self._metrics.count_version_request(self.name, self.version, outcome.failed, outcome.prompt_tokens,
                                            outcome.completion_tokens, outcome.time_to_first_token_s)
        if self._on_outcome is not None:
            self._on_outcome(self, outcome)

    async def prepare(self) -> None:
        """Make ready what a request needs besides the engine itself (nothing, for a model)."""

    async def wait_until_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until every request taken has ended; False if `timeout_s` passed first."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except asyncio.TimeoutError:
            return False
        return True

    async def retire(self) -> None:
        """Take no new request, let the ones taken finish, then stop the engine and the tokenizer workers."""
        self.state = VersionState.DRAINING
        logger.info("%s takes no new requests; it unloads once its %d in flight end", self.version_id,
                    self._in_flight)
        await self.wait_until_idle()
        await self.close()
        logger.info("%s unloaded", self.version_id)

    async def close(self) -> None:
        """Stop at once: requests still open end with EngineDeadError."""
        self.tokenizers.shutdown()
        if self.images is not None:
            self.images.shutdown()
        await self.engine.shutdown()
        self.state = VersionState.UNLOADED
