"""docker-compose.yaml: a valid Compose file (`docker compose config` where the tool exists, the Compose
Specification's schema always), whose Prometheus scrapes the server and whose Grafana loads the dashboard."""
from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from jsonschema import Draft201909Validator

from autoglm.server.http.uvicorn_config import CONNECTION_CLOSE_TIMEOUT_S
from tests.deploy.deploy_files import COMPOSE_FILE, DASHBOARD, DATA, DOCKERFILES, REPO_ROOT, dockerfile_env, settings_of

SERVER = "autoglm"


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def _docker_compose_present() -> bool:
    return shutil.which("docker") is not None and subprocess.run(
        ["docker", "compose", "version"], capture_output=True, timeout=60).returncode == 0


def test_the_compose_file_follows_the_compose_specification() -> None:
    schema = json.loads((DATA / "compose-spec.json").read_text())
    errors = [error.message for error in Draft201909Validator(schema).iter_errors(compose())]
    assert errors == []


def test_the_schema_refuses_a_misspelt_service_setting() -> None:
    schema = json.loads((DATA / "compose-spec.json").read_text())
    misspelt = compose()
    misspelt["services"][SERVER]["stop_grace_periods"] = misspelt["services"][SERVER].pop("stop_grace_period")
    assert not Draft201909Validator(schema).is_valid(misspelt)


@pytest.mark.skipif(not _docker_compose_present(), reason="docker compose is not installed here")
def test_docker_compose_reads_the_file() -> None:
    result = subprocess.run(["docker", "compose", "-f", str(COMPOSE_FILE), "config", "--quiet"],
                            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr


def _server_settings():
    """The server's settings in compose: the CPU image's environment, then the service's own."""
    return settings_of({**dockerfile_env(DOCKERFILES[0]), **compose()["services"][SERVER]["environment"]})


def _seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60}
    unit = "ms" if duration.endswith("ms") else duration[-1]
    return float(duration[: -len(unit)]) * units[unit]


def test_the_server_is_given_time_to_drain_and_shares_redis() -> None:
    service = compose()["services"][SERVER]
    settings = _server_settings()
    assert _seconds(service["stop_grace_period"]) > settings.drain_timeout_s + CONNECTION_CLOSE_TIMEOUT_S
    assert settings.rate_limit_storage.startswith("redis://redis:")
    assert settings.response_cache.startswith("redis://redis:")
    assert service["depends_on"]["redis"]["condition"] == "service_healthy"
    assert service["build"]["dockerfile"] == DOCKERFILES[0].name


def test_every_mounted_file_is_in_the_repository() -> None:
    for name, service in compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert (REPO_ROOT / source).exists(), f"{name} mounts {source}, which is missing"


def _mounted_at(service: dict[str, Any], target: str) -> str:
    """The repository path the service mounts at `target`."""
    (source,) = [volume.split(":")[0] for volume in service["volumes"] if volume.split(":")[1] == target]
    return source


def test_prometheus_scrapes_the_servers_metrics() -> None:
    services = compose()["services"]
    config_file = _mounted_at(services["prometheus"], "/etc/prometheus/prometheus.yml")
    (job,) = yaml.safe_load((REPO_ROOT / config_file).read_text())["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == [f"{SERVER}:{_server_settings().port}"]


def test_grafana_reads_prometheus_and_loads_the_dashboard() -> None:
    grafana = compose()["services"]["grafana"]
    provisioning = REPO_ROOT / _mounted_at(grafana, "/etc/grafana/provisioning")
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())["datasources"]
    assert datasource["type"] == "prometheus"
    assert datasource["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "autoglm.yaml").read_text())["providers"]
    dashboards = REPO_ROOT / _mounted_at(grafana, provider["options"]["path"])
    assert DASHBOARD.parent == dashboards.resolve()
