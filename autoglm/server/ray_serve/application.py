"""The Ray Serve application: an ingress deployment in front of the engine deployment, configured by settings.

The engine deployment's replicas scale with Ray Serve's own autoscaler on ongoing requests,
between ray_min_replicas and ray_max_replicas (a fixed count when the two are equal); each
reserves num_threads CPUs (one without it) and ray_num_gpus GPUs. A replica takes as many
requests as its engine runs and queues, so Ray queues the rest in front of the replicas instead
of the engine refusing them. Stopping a replica lets its requests finish for drain_timeout_s.
"""
from __future__ import annotations

from typing import Any

from ray import serve
from ray.serve import Application
from ray.serve.config import RequestRouterConfig

from autoglm.config import ServerConfig
from autoglm.server.ray_serve.engine_replica import EngineReplica
from autoglm.server.ray_serve.ingress import Ingress, PrefixRouting
from autoglm.server.ray_serve.request_router import PrefixAffinityRouter

ENGINE_DEPLOYMENT = "AutoGLMEngine"
INGRESS_DEPLOYMENT = "AutoGLMIngress"
# Requests the one ingress replica relays at once: it only waits on the engines, so its cap is theirs to set.
INGRESS_MAX_ONGOING_REQUESTS = 10_000


def target_ongoing_requests(config: ServerConfig) -> float:
    return config.ray.ray_target_ongoing_requests or config.engine.scheduler.max_num_seqs


def replica_count_options(config: ServerConfig) -> dict[str, Any]:
    """A fixed number of replicas, or Ray Serve's autoscaling between the two bounds."""
    if config.ray.ray_min_replicas == config.ray.ray_max_replicas:
        return {"num_replicas": config.ray.ray_min_replicas}
    return {"autoscaling_config": {"min_replicas": config.ray.ray_min_replicas,
                                   "max_replicas": config.ray.ray_max_replicas,
                                   "target_ongoing_requests": target_ongoing_requests(config)}}


def engine_options(config: ServerConfig) -> dict[str, Any]:
    """The engine deployment's options, prefix-affinity routing included when it is on."""
    options: dict[str, Any] = {
        **replica_count_options(config),
        "ray_actor_options": {"num_cpus": config.engine.device.num_threads or 1,
                              "num_gpus": config.ray.ray_num_gpus},
        "max_ongoing_requests": config.engine.scheduler.max_num_seqs + config.http.max_waiting_requests,
        "graceful_shutdown_timeout_s": config.http.drain_timeout_s,
    }
    if config.ray.ray_prefix_routing:
        options["request_router_config"] = RequestRouterConfig(
            request_router_class=PrefixAffinityRouter,
            request_router_kwargs={"busy_requests": target_ongoing_requests(config)})
    return options


def build_application(config: ServerConfig) -> Application:
    """The application; a ConfigError for settings that several replicas cannot honour together."""
    config.check_ray_rate_limits()
    engine = serve.deployment(EngineReplica, name=ENGINE_DEPLOYMENT, **engine_options(config))
    ingress = serve.deployment(Ingress, name=INGRESS_DEPLOYMENT, num_replicas=1,
                               ray_actor_options={"num_cpus": 0},
                               max_ongoing_requests=INGRESS_MAX_ONGOING_REQUESTS)
    routing = PrefixRouting(config.ray.ray_prefix_routing, config.ray.ray_prefix_routing_chars)
    return ingress.bind(engine.bind(config), routing)
