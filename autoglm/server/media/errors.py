"""The error of an image the request must fix: what is wrong and what is allowed, and its HTTP status."""
from __future__ import annotations

from http import HTTPStatus

from autoglm.errors import InvalidRequestError
from autoglm.server.openai.errors import APIError


class MediaError(InvalidRequestError):
    """An image that cannot be read, or that breaks a limit; `status` is 413 where it is too large."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status

    @classmethod
    def of(cls, error: InvalidRequestError) -> MediaError:
        """`error` as a MediaError: itself, or a 400 with its message (from preprocessing, below the server)."""
        return error if isinstance(error, MediaError) else cls(str(error))

    def at(self, param: str) -> APIError:
        """The API's error naming the part at fault, `messages[i].content[j]`, in its message and its param."""
        code = "request_too_large" if self.status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE else "invalid_value"
        return APIError(self.status, f"{param}: {self}", param=param, code=code)


def too_large(what: str, size: int, limit: int) -> MediaError:
    """An image's encoded bytes over max_image_bytes."""
    return MediaError(f"{what} is {size} bytes or more, larger than max_image_bytes={limit}",
                      HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
