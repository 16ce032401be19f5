"""One log line when the rate-limit storage goes away and one when it is back, however many requests
are refused meanwhile."""
from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TypeVar

from limits.errors import StorageError

logger = logging.getLogger(__name__)

Result = TypeVar("Result")


class StorageOutage:
    """Watches every call to the storage: the first failure after a success is logged as an ERROR, the
    first success after a failure as a WARNING; the calls in between say nothing."""

    def __init__(self) -> None:
        self.down = False

    async def watch(self, call: Awaitable[Result]) -> Result:
        """`call`'s result; its StorageError passes through, logged only if it starts an outage."""
        try:
            result = await call
        except StorageError as error:
            if not self.down:
                self.down = True
                cause = error.storage_error
                logger.error("the rate-limit storage cannot be reached (%s: %s); limited tenants' requests get "
                             "503 until it can (said once, and once when it is back)", type(cause).__name__, cause)
            raise
        if self.down:
            self.down = False
            logger.warning("the rate-limit storage answers again; limited tenants' requests are counted again")
        return result
