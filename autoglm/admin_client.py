"""A client of a running server's model admin API (``/admin/models``), for ``autoglm models``' remote commands.

It speaks plain HTTP with the standard library, so the command line needs no HTTP package; every failure
becomes one AdminAPIError whose message says what to do (start the server, pass an admin key, ...).
"""
from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

DEFAULT_SERVER_URL = "http://127.0.0.1:8000"
API_KEY_ENV = "AUTOGLM_API_KEY"
# Promote may load a checkpoint before it answers.
REQUEST_TIMEOUT_S = 600.0


class AdminAPIError(ValueError):
    """The server could not be reached, refused the operation, or answered something unexpected."""


@dataclass(frozen=True)
class ServedVersion:
    version: str
    state: str  # loading | loaded | draining | unloaded
    in_flight: int
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class CanarySplit:
    version: str
    percent: float


@dataclass(frozen=True)
class ServedModel:
    """One model as the server holds it: its aliases, canary split and versions."""

    name: str
    aliases: dict[str, str]
    canary: CanarySplit | None
    versions: tuple[ServedVersion, ...]

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> ServedModel:
        canary = entry.get("canary")
        return cls(
            name=entry["name"], aliases=dict(entry.get("aliases") or {}),
            canary=CanarySplit(str(canary["version"]), float(canary["percent"])) if canary else None,
            versions=tuple(ServedVersion(str(version["version"]), version["state"], int(version["in_flight"]),
                                         tuple(version.get("aliases") or ()))
                           for version in entry.get("versions") or ()),
        )


@dataclass(frozen=True)
class AdminClient:
    """Calls the model admin routes of the server at ``url``, with ``api_key`` as a bearer token if given."""

    url: str = DEFAULT_SERVER_URL
    api_key: str | None = None

    def models(self) -> list[ServedModel]:
        """GET /admin/models: every model the server holds."""
        answer = self._call("GET", "/admin/models")
        return [self._parse(entry) for entry in self._field(answer, "models", list)]

    def operate(self, name: str, operation: str, body: dict[str, Any]) -> ServedModel:
        """POST /admin/models/NAME/OPERATION (load, unload, promote, rollback, canary): the model's new entry."""
        path = f"/admin/models/{urllib.parse.quote(name, safe='')}/{operation}"
        return self._parse(self._call("POST", path, body))

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = self.url.rstrip("/") + path
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                return self._json(response.read(), url)
        except urllib.error.HTTPError as error:
            raise AdminAPIError(self._refusal(method, url, error)) from None
        except urllib.error.URLError as error:
            raise AdminAPIError(self._unreachable(error.reason)) from None
        except (TimeoutError, socket.timeout):
            raise AdminAPIError(f"the server at {self.url} did not answer {method} {path} within "
                                f"{REQUEST_TIMEOUT_S:.0f} s") from None

    def _unreachable(self, reason: object) -> str:
        if isinstance(reason, ConnectionRefusedError):
            return (f"cannot reach the server at {self.url}: connection refused; start it with `autoglm serve` "
                    "or give its address with --url")
        return f"cannot reach the server at {self.url}: {reason}; check --url"

    def _refusal(self, method: str, url: str, error: urllib.error.HTTPError) -> str:
        """The server's own message (OpenAI's error shape) with the status, and a hint for a missing key."""
        text = error.read().decode("utf-8", errors="replace")
        try:
            message = json.loads(text)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = text.strip() or error.reason
        hint = ""
        if error.code in (401, 403):
            hint = f"; pass an admin key with --api-key or the {API_KEY_ENV} variable"
        return f"{method} {url} answered {error.code}: {message}{hint}"

    def _json(self, data: bytes, url: str) -> Any:
        try:
            return json.loads(data)
        except ValueError:
            raise AdminAPIError(f"{url} answered something other than JSON: {data[:80]!r}") from None

    def _field(self, answer: Any, name: str, kind: type) -> Any:
        if not isinstance(answer, dict) or not isinstance(answer.get(name), kind):
            raise AdminAPIError(f"the server at {self.url} answered without a {name!r} {kind.__name__}: "
                                f"{str(answer)[:80]}; is it an autoglm server with the model admin API?")
        return answer[name]

    def _parse(self, entry: Any) -> ServedModel:
        try:
            return ServedModel.from_json(entry)
        except (KeyError, TypeError, ValueError) as error:
            raise AdminAPIError(f"the server at {self.url} answered a model entry this client cannot read "
                                f"(missing or bad {error}): {str(entry)[:80]}") from None
