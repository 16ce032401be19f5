"""The one error type that means "the caller's input is wrong", as opposed to a bug in autoglm."""
from __future__ import annotations


class InvalidRequestError(ValueError):
    """A parameter, prompt or request id the caller must fix; its message names what is wrong
    and what is allowed. The server answers it with 400; any other exception is a server bug
    (500). A ValueError, so callers of the offline API catch it as before.

    `param` names the request field at fault, where there is one, for the API's error body.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param
