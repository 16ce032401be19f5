"""The server on Ray Serve: engine replicas behind Ray's HTTP proxy, scaled by Ray, routed by prompt prefix.

Ray is an optional extra (``pip install 'open-autoglm[ray]'``): only this package imports it, and
only its modules that talk to Ray. ``serve run autoglm.server.ray_serve:app_builder KEY=VALUE ...``
deploys it with settings given as builder arguments; ``autoglm serve --ray`` does the same from
the usual flags, settings file and AUTOGLM_* variables.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray.serve import Application


def app_builder(args: dict[str, Any]) -> Application:
    """The application `serve run` deploys: each argument is a setting (``config=FILE`` reads a settings
    file first); AUTOGLM_* variables apply below the arguments, as on the command line."""
    from autoglm.config import AutoGLMConfig
    from autoglm.server.ray_serve.application import build_application

    settings = dict(args)
    config = AutoGLMConfig.from_sources(settings.pop("config", None), overrides=settings)
    return build_application(config.server_config())


class RayNotInstalledError(ValueError):
    """Ray Serve is an optional extra, and it is missing."""


def require_ray() -> None:
    """Raise RayNotInstalledError, saying how to install it, unless Ray Serve can be imported."""
    try:
        import ray.serve  # noqa: F401
    except ImportError:
        raise RayNotInstalledError("serving on Ray needs Ray Serve: pip install 'open-autoglm[ray]'") from None
