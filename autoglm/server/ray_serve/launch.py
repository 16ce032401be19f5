"""``autoglm serve --ray``: deploy the application on Ray Serve and keep it up until a stop signal.

It joins the Ray cluster RAY_ADDRESS names (or one already running on this machine), else starts
one here. Ray's HTTP proxy listens on the host and port settings. The first SIGTERM or SIGINT,
even one that comes while the replicas still load, deletes the application once it is deployed,
which lets each replica's requests finish first; a second one exits at once. A cluster started
here stops with the command.
"""
from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

import ray
from ray import serve

from autoglm.config import AutoGLMConfig
from autoglm.server.ray_serve.application import build_application

logger = logging.getLogger(__name__)

APP_NAME = "autoglm"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def run_on_ray(config: AutoGLMConfig) -> int:
    ray.init()
    stopping = threading.Event()

    def stop(signum: int, _: FrameType | None) -> None:
        if stopping.is_set():
            raise SystemExit(128 + signum)
        stopping.set()

    for stop_signal in STOP_SIGNALS:  # after ray.init, which installs its own
        signal.signal(stop_signal, stop)
    serve.start(http_options={"host": config.host, "port": config.port})
    serve.run(build_application(config), name=APP_NAME, route_prefix="/")
    logger.info("serving on http://%s:%d through Ray Serve (replicas: %d to %d)", config.host, config.port,
                config.ray_min_replicas, config.ray_max_replicas)
    stopping.wait()
    logger.info("stopping: the replicas finish their requests for up to %gs", config.drain_timeout_s)
    serve.delete(APP_NAME)
    return 0
