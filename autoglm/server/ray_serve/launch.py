"""``autoglm serve --ray``: deploy the application on Ray Serve and keep it up until a stop signal.

It joins the Ray cluster RAY_ADDRESS names (or one already running on this machine), else starts
one here. Ray's HTTP proxy listens on the host and port settings. The first SIGTERM or SIGINT,
even one that comes while the replicas still load, deletes the application once it is deployed,
which lets each replica's requests finish first; a second one exits at once. A cluster started
here stops with the command. SIGHUP has every engine replica read the tenants file again, and
logs each one's answer, as POST /admin/reload does.
"""
from __future__ import annotations

import logging
import queue
import signal
from types import FrameType

import ray
from ray import serve

from autoglm.config import ServerConfig
from autoglm.server.ray_serve.application import ENGINE_DEPLOYMENT, build_application

logger = logging.getLogger(__name__)

APP_NAME = "autoglm"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def run_on_ray(config: ServerConfig) -> int:
    config.check_ray_rate_limits()  # before starting a cluster for nothing
    ray.init()
    signals: queue.SimpleQueue[int] = queue.SimpleQueue()  # safe to fill from a signal handler
    stopping = False

    def stop(signum: int, _: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            raise SystemExit(128 + signum)
        stopping = True
        signals.put(signum)

    for stop_signal in STOP_SIGNALS:  # after ray.init, which installs its own
        signal.signal(stop_signal, stop)
    signal.signal(signal.SIGHUP, lambda signum, _: signals.put(signum))
    serve.start(http_options={"host": config.http.host, "port": config.http.port})
    serve.run(build_application(config), name=APP_NAME, route_prefix="/")
    logger.info("serving on http://%s:%d through Ray Serve (replicas: %d to %d)", config.http.host, config.http.port,
                config.ray.ray_min_replicas, config.ray.ray_max_replicas)
    while signals.get() == signal.SIGHUP:
        reload_every_replica()
    logger.info("stopping: the replicas finish their requests for up to %gs", config.http.drain_timeout_s)
    serve.delete(APP_NAME)
    return 0


def reload_every_replica() -> None:
    """Every running engine replica reads the tenants file again; each one's answer is logged."""
    engines = serve.get_deployment_handle(ENGINE_DEPLOYMENT, APP_NAME)
    try:
        outcomes = engines.broadcast("reload_tenants").results(return_exceptions=True)
    except Exception as error:  # no replica is running: the next one to start reads the file anyway
        logger.error("no engine replica to read the tenants file again: %s: %s", type(error).__name__, error)
        return
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            logger.error("an engine replica did not read the tenants file again: %s: %s", type(outcome).__name__,
                         outcome)
        else:
            logger.info("tenants file read again on %s", outcome)
