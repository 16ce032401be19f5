"""The deployment files as the tests read them: Dockerfiles, compose, Kubernetes manifests, the dashboard."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autoglm.config import AutoGLMConfig

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = (REPO_ROOT / "Dockerfile", REPO_ROOT / "Dockerfile.cuda")
COMPOSE_FILE = REPO_ROOT / "docker-compose.yaml"
KUBERNETES = REPO_ROOT / "deploy" / "kubernetes"
VARIANTS = ("cpu", "gpu")
SERVICE_MONITOR = KUBERNETES / "monitoring" / "servicemonitor.yaml"
ADAPTER_RULES = KUBERNETES / "monitoring" / "prometheus-adapter-rules.yaml"
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "dashboards" / "autoglm.json"
DATA = Path(__file__).parent / "data"

_CONTINUED_LINE = re.compile(r"\\\n\s*")


@dataclass(frozen=True)
class Manifest:
    """One Kubernetes object and the file it came from."""

    path: Path
    body: dict[str, Any]

    @property
    def kind(self) -> str:
        return self.body["kind"]

    @property
    def name(self) -> str:
        return self.body["metadata"]["name"]

    def __str__(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.kind}/{self.name}"


def manifests() -> list[Manifest]:
    """Every object of every YAML file under deploy/kubernetes."""
    return [Manifest(path, body) for path in sorted(KUBERNETES.rglob("*.yaml"))
            for body in yaml.safe_load_all(path.read_text()) if body is not None]


def variant(name: str) -> dict[str, dict[str, Any]]:
    """The objects of deploy/kubernetes/NAME by kind (each kind appears once)."""
    objects = [manifest for manifest in manifests() if manifest.path.parent.name == name]
    by_kind = {manifest.kind: manifest.body for manifest in objects}
    assert len(by_kind) == len(objects), f"{name}: one object of each kind expected"
    return by_kind


def server_container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def container_env(container: dict[str, Any]) -> dict[str, str]:
    return {variable["name"]: variable["value"] for variable in container.get("env", [])}


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of each instruction, continuation lines joined, comments left out."""
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    joined = _CONTINUED_LINE.sub(" ", "\n".join(lines))
    return [(line.split(maxsplit=1)[0].upper(), line.split(maxsplit=1)[1])
            for line in joined.splitlines() if line.strip()]


def final_stage(path: Path) -> list[tuple[str, str]]:
    """The instructions of a Dockerfile's last stage, the one the image runs."""
    instructions = dockerfile_instructions(path)
    last_from = max(index for index, (instruction, _) in enumerate(instructions) if instruction == "FROM")
    return instructions[last_from:]


def dockerfile_env(path: Path) -> dict[str, str]:
    """The variables the last stage's ENV instructions set (KEY=VALUE form)."""
    return {key: value for instruction, arguments in final_stage(path) if instruction == "ENV"
            for key, value in (pair.split("=", 1) for pair in arguments.split())}


def settings_of(env: dict[str, str]) -> AutoGLMConfig:
    """The server settings an environment gives (raises ConfigError on an unknown or bad AUTOGLM_ variable)."""
    return AutoGLMConfig.from_sources(env={key: value for key, value in env.items() if key.startswith("AUTOGLM_")})


def adapter_rules() -> list[dict[str, Any]]:
    """The Prometheus adapter's rules, from the config its ConfigMap holds."""
    config_map = yaml.safe_load(ADAPTER_RULES.read_text())
    return yaml.safe_load(config_map["data"]["config.yaml"])["rules"]


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())
