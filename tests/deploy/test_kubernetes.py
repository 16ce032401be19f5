"""The Kubernetes manifests: valid for the API server (strict: no unknown field), the ServiceMonitor valid for the
prometheus-operator's CRD, and the parts agreeing with each other and with the server (probes on /health, a
grace period above the drain, the HPA's metric served by the adapter rule)."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import kubernetes_validate
import pytest
import yaml
from jsonschema import Draft7Validator, ValidationError

from autoglm.server.http.uvicorn_config import CONNECTION_CLOSE_TIMEOUT_S
from tests.deploy.deploy_files import (
    DATA,
    SERVICE_MONITOR,
    VARIANTS,
    adapter_rules,
    container_env,
    manifests,
    server_container,
    settings_of,
    variant,
)

KUBERNETES_VERSION = "1.33.0"
# Seconds each variant's startup probe must allow for loading the model: the embedded one, a large checkpoint.
MODEL_LOADING_BUDGET_S = {"cpu": 120, "gpu": 600}


def _api_objects() -> list:
    return [manifest for manifest in manifests() if manifest.kind != "ServiceMonitor"]


@pytest.mark.parametrize("manifest", _api_objects(), ids=str)
def test_each_manifest_is_valid_for_the_api_server_strictly(manifest) -> None:
    kubernetes_validate.validate(manifest.body, KUBERNETES_VERSION, strict=True)


def test_strict_validation_refuses_a_misspelt_field() -> None:
    deployment = copy.deepcopy(variant("cpu")["Deployment"])
    server_container(deployment)["readinesProbe"] = server_container(deployment).pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def _closed(schema: Any) -> Any:
    """The schema with every object that lists its properties refusing others, as strict field validation does
    (the API server would otherwise drop a misspelt field without a word)."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: _closed(value) for key, value in schema.items()}
    if "properties" in schema and "additionalProperties" not in schema:
        closed["additionalProperties"] = False
    return closed


@dataclass(frozen=True)
class CustomResourceSchema:
    """What a CRD says its objects are: their apiVersion and kind, and the schema they follow."""

    api_version: str
    kind: str
    validator: Draft7Validator

    def validate(self, body: dict[str, Any]) -> None:
        assert (body["apiVersion"], body["kind"]) == (self.api_version, self.kind)
        self.validator.validate(body)


@pytest.fixture(scope="module")
def service_monitor_schema() -> CustomResourceSchema:
    crd = yaml.safe_load((DATA / "servicemonitor-crd.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    return CustomResourceSchema(f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"],
                                Draft7Validator(_closed(version["schema"]["openAPIV3Schema"])))


def test_the_service_monitor_is_valid_for_the_operators_crd(service_monitor_schema) -> None:
    service_monitor_schema.validate(yaml.safe_load(SERVICE_MONITOR.read_text()))


def test_the_crd_schema_refuses_a_bad_interval_and_a_misspelt_field(service_monitor_schema) -> None:
    service_monitor = yaml.safe_load(SERVICE_MONITOR.read_text())
    bad_interval = copy.deepcopy(service_monitor)
    bad_interval["spec"]["endpoints"][0]["interval"] = "15 seconds"
    misspelt = copy.deepcopy(service_monitor)
    misspelt["spec"]["endpoints"][0]["scrapeTimeOut"] = "10s"
    for body in (bad_interval, misspelt):
        with pytest.raises(ValidationError):
            service_monitor_schema.validate(body)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "only matchLabels selectors are used here"
    return selector["matchLabels"].items() <= labels.items()


@pytest.mark.parametrize("name", VARIANTS)
def test_a_variants_service_pdb_and_hpa_point_at_its_deployment(name: str) -> None:
    objects = variant(name)
    deployment, service = objects["Deployment"], objects["Service"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert _selects(deployment["spec"]["selector"], pod_labels)
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert _selects(objects["PodDisruptionBudget"]["spec"]["selector"], pod_labels)
    target = objects["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    container_ports = {port["name"]: port["containerPort"] for port in server_container(deployment)["ports"]}
    assert {port["targetPort"] for port in service["spec"]["ports"]} <= container_ports.keys()


@pytest.mark.parametrize("name", VARIANTS)
def test_the_service_monitor_and_the_scrape_annotations_reach_the_servers_metrics(name: str) -> None:
    objects = variant(name)
    deployment, service = objects["Deployment"], objects["Service"]
    container = server_container(deployment)
    service_monitor = yaml.safe_load(SERVICE_MONITOR.read_text())
    endpoint_ports = {endpoint["port"] for endpoint in service_monitor["spec"]["endpoints"]}
    assert _selects(service_monitor["spec"]["selector"], service["metadata"]["labels"])
    assert endpoint_ports <= {port["name"] for port in service["spec"]["ports"]}
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == "/metrics"
    assert int(annotations["prometheus.io/port"]) == settings_of(container_env(container)).port


@pytest.mark.parametrize("name", VARIANTS)
def test_probes_ask_health_and_startup_allows_for_loading_the_model(name: str) -> None:
    container = server_container(variant(name)["Deployment"])
    port_names = {port["name"]: port["containerPort"] for port in container["ports"]}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/health", probe
        assert port_names[container[probe]["httpGet"]["port"]] == settings_of(container_env(container)).port
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= MODEL_LOADING_BUDGET_S[name]


@pytest.mark.parametrize("name", VARIANTS)
def test_the_grace_period_outlasts_the_pre_stop_pause_and_the_drain(name: str) -> None:
    deployment = variant(name)["Deployment"]
    container = server_container(deployment)
    drain_s = settings_of(container_env(container)).drain_timeout_s
    pre_stop_s = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > (
        pre_stop_s + drain_s + CONNECTION_CLOSE_TIMEOUT_S)


@pytest.mark.parametrize("name", VARIANTS)
def test_resources_are_requested_and_memory_is_limited(name: str) -> None:
    resources = server_container(variant(name)["Deployment"])["resources"]
    assert {"cpu", "memory"} <= resources["requests"].keys()
    assert resources["limits"]["memory"] == resources["requests"]["memory"]


def test_the_cpu_variant_serves_the_images_model_and_the_gpu_variant_one_from_a_volume() -> None:
    cpu = server_container(variant("cpu")["Deployment"])
    assert settings_of(container_env(cpu)).model is None, "the embedded default model, inside the image"
    gpu_objects = variant("gpu")
    gpu_pod = gpu_objects["Deployment"]["spec"]["template"]["spec"]
    gpu = server_container(gpu_objects["Deployment"])
    claim = gpu_objects["PersistentVolumeClaim"]["metadata"]["name"]
    (model_volume,) = [volume["name"] for volume in gpu_pod["volumes"]
                       if volume.get("persistentVolumeClaim", {}).get("claimName") == claim]
    (mount,) = [mount for mount in gpu["volumeMounts"] if mount["name"] == model_volume]
    assert settings_of(container_env(gpu)).model.startswith(mount["mountPath"] + "/")
    assert gpu["resources"]["limits"]["nvidia.com/gpu"] == "1"


@pytest.mark.parametrize("name", VARIANTS)
def test_the_hpa_scales_on_the_adapters_waiting_requests_with_cpu_as_the_fallback(name: str) -> None:
    metrics = variant(name)["HorizontalPodAutoscaler"]["spec"]["metrics"]
    pods_metrics = {metric["pods"]["metric"]["name"] for metric in metrics if metric["type"] == "Pods"}
    resources = {metric["resource"]["name"] for metric in metrics if metric["type"] == "Resource"}
    served = {rule["name"]["as"]: rule["seriesQuery"] for rule in adapter_rules()}
    assert pods_metrics == {"autoglm_num_requests_waiting"}
    assert pods_metrics <= served.keys()
    assert served["autoglm_num_requests_waiting"].startswith("autoglm:num_requests_waiting{")
    assert resources == {"cpu"}
