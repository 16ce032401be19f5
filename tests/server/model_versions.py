"""A directory registry holding two versions of one tiny model with different weights (their greedy outputs
differ, so a test can tell which served), and live servers serving it."""
from __future__ import annotations

import shutil
from pathlib import Path

import httpx

from autoglm.registry import DirectoryRegistry
from tests.server.live_server import RunningServer, start_server
from tests.tiny_models import make_tiny_checkpoint

MODEL = "tiny"
PROMPT = "Hello world"


def make_registry(folder: Path) -> Path:
    """A registry at folder/registry: MODEL versions 1 (the stable) and 2, from seeds 1 and 2."""
    registry = DirectoryRegistry(folder / "registry")
    for seed in (1, 2):
        registry.register(MODEL, make_tiny_checkpoint("llama", folder / f"seed-{seed}", seed=seed))
    return folder / "registry"


def register_copy(registry_dir: Path, of_version: str, into: Path) -> str:
    """Register a copy of a version's checkpoint as a new version (to corrupt it safely); its number."""
    registry = DirectoryRegistry(registry_dir)
    shutil.copytree(registry.version(MODEL, of_version).path, into)
    return registry.register(MODEL, into).version


def serve_registry(registry_dir: Path, references: tuple[str, ...] = (MODEL, f"{MODEL}@2"),
                   **settings: object) -> RunningServer:
    """Serve `references` (by default the stable and version 2 as warm standby)."""
    checkpoint = DirectoryRegistry(registry_dir).version(MODEL, "1").path
    return start_server(checkpoint, serve_models=references, registry_dir=str(registry_dir), **settings)


def complete(url: str, model: str = MODEL, **fields: object) -> dict:
    """A greedy completion's JSON (raises on an error status)."""
    body = {"model": model, "prompt": PROMPT, "max_tokens": 8, "temperature": 0, **fields}
    response = httpx.post(url + "/v1/completions", json=body, timeout=60)
    response.raise_for_status()
    return response.json()


def operate(url: str, operation: str, **body: object) -> httpx.Response:
    """POST /admin/models/MODEL/OPERATION."""
    return httpx.post(f"{url}/admin/models/{MODEL}/{operation}", json=body, timeout=120)


def served_model(url: str) -> dict:
    """MODEL's entry in GET /admin/models."""
    models = httpx.get(url + "/admin/models", timeout=10).json()["models"]
    return next(entry for entry in models if entry["name"] == MODEL)
