"""The Ray Serve settings: how they shape the deployments, where they show, and a clear word when Ray is missing."""
from __future__ import annotations

import sys

import pytest
from ray.serve import Application

from autoglm.cli.main import main
from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.server.ray_serve import app_builder
from autoglm.server.ray_serve.application import engine_options, replica_count_options
from autoglm.server.ray_serve.request_router import PrefixAffinityRouter
from tests.test_cli import option_strings, subcommand

RAY_FLAGS = {"--ray", "--ray-min-replicas", "--ray-max-replicas", "--ray-target-ongoing-requests",
             "--ray-prefix-routing", "--ray-prefix-routing-chars", "--ray-metrics-port", "--ray-num-gpus"}


def test_equal_bounds_fix_the_replica_count_and_others_autoscale_on_ongoing_requests():
    fixed = AutoGLMConfig(ray_min_replicas=3, ray_max_replicas=3).server_config()
    assert replica_count_options(fixed) == {"num_replicas": 3}
    autoscaled = replica_count_options(AutoGLMConfig(ray_max_replicas=4, max_num_seqs=8).server_config())
    assert autoscaled == {"autoscaling_config": {"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 8}}
    given = replica_count_options(AutoGLMConfig(ray_max_replicas=4, ray_target_ongoing_requests=2.5).server_config())
    assert given["autoscaling_config"]["target_ongoing_requests"] == 2.5


def test_more_fewest_than_most_replicas_is_refused_naming_both():
    with pytest.raises(ConfigError, match=r"ray_max_replicas: got 2 .* must be at least ray_min_replicas \(3\)"):
        AutoGLMConfig(ray_min_replicas=3, ray_max_replicas=2)


def test_a_replica_takes_what_its_engine_runs_and_queues_and_drains_like_the_server():
    options = engine_options(AutoGLMConfig(num_threads=2, max_num_seqs=8, max_waiting_requests=24,
                                           drain_timeout_s=12, ray_num_gpus=0.5).server_config())
    assert options["ray_actor_options"] == {"num_cpus": 2, "num_gpus": 0.5}
    assert options["max_ongoing_requests"] == 32
    assert options["graceful_shutdown_timeout_s"] == 12
    assert engine_options(AutoGLMConfig().server_config())["ray_actor_options"]["num_cpus"] == 1


def test_prefix_routing_uses_the_prefix_router_and_off_leaves_rays_default():
    router = engine_options(AutoGLMConfig(max_num_seqs=6).server_config())["request_router_config"]
    assert router.request_router_class == f"{PrefixAffinityRouter.__module__}.{PrefixAffinityRouter.__name__}"
    assert router.request_router_kwargs == {"busy_requests": 6}
    assert "request_router_config" not in engine_options(AutoGLMConfig(ray_prefix_routing=False).server_config())


def test_serve_run_builder_reads_settings_from_its_arguments_and_a_file(tmp_path):
    settings = tmp_path / "settings.yaml"
    settings.write_text("max_num_seqs: 4\n")
    assert isinstance(app_builder({"config": str(settings), "ray_max_replicas": "2"}), Application)
    with pytest.raises(ConfigError, match="unknown setting 'ray_replicas'"):
        app_builder({"ray_replicas": "2"})


def test_several_replicas_with_tenants_are_refused_unless_their_limits_are_shared_in_redis(tmp_path):
    tenants = {"tenants_file": str(tmp_path / "tenants.yaml")}
    with pytest.raises(ConfigError, match=r"up to 2 replicas \(ray_max_replicas\) and a tenants_file needs "
                                          r"rate_limit_storage: redis://HOST:PORT\[/DB\]"):
        app_builder({"ray_max_replicas": "2", **tenants})
    assert isinstance(app_builder({"ray_max_replicas": "2", "rate_limit_storage": "redis://127.0.0.1:6379",
                                   **tenants}), Application)
    assert isinstance(app_builder({"ray_max_replicas": "1", **tenants}), Application)
    assert isinstance(app_builder({"ray_max_replicas": "2", "api_key": "one key, no limits"}), Application)


def test_serve_on_ray_refuses_them_before_starting_a_cluster(tmp_path, capsys):
    assert main(["serve", "--ray", "--ray-max-replicas", "2", "--tenants-file", str(tmp_path / "tenants.yaml")]) == 2
    assert "needs rate_limit_storage: redis://" in capsys.readouterr().err


def test_only_serve_lists_the_ray_flags():
    assert RAY_FLAGS <= option_strings(subcommand(["serve"]))
    assert not RAY_FLAGS & option_strings(subcommand(["generate"]))


def test_serve_on_ray_without_ray_says_how_to_install_it(monkeypatch, capsys):
    for module in ("ray", "ray.serve"):
        monkeypatch.setitem(sys.modules, module, None)
    assert main(["serve", "--ray"]) == 2
    assert "serving on Ray needs Ray Serve: pip install 'open-autoglm[ray]'" in capsys.readouterr().err
