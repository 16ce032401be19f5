"""A server whose versions live in a real MLflow model registry (a sqlite store in a temp folder): served by
`models:/NAME@stable`, promoted and rolled back, the registry's `stable` alias moving with them."""
from __future__ import annotations

import pytest

from tests.server.live_server import start_server
from tests.server.model_versions import complete, operate
from tests.tiny_models import make_tiny_checkpoint

pytest.importorskip("mlflow", reason="the open-autoglm[mlflow] extra (installed by make test)")


def test_a_server_serves_promotes_and_rolls_back_mlflow_versions(tmp_path, monkeypatch):
    from autoglm.registry.mlflow_registry import MlflowRegistry

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    registry = MlflowRegistry(uri)
    for seed in (1, 2):
        registry.register("tiny", make_tiny_checkpoint("llama", tmp_path / f"seed-{seed}", seed=seed))
    running = start_server(tmp_path / "seed-1", serve_models=("models:/tiny@stable",), registry="mlflow",
                           mlflow_tracking_uri=uri)
    try:
        first = complete(running.url)
        assert first["model"] == "tiny@1"
        response = operate(running.url, "promote", version="2")
        assert response.status_code == 200, response.text
        second = complete(running.url)
        assert second["model"] == "tiny@2" and second["choices"][0]["text"] != first["choices"][0]["text"]
        assert registry.aliases("tiny")["stable"] == "2"
        assert operate(running.url, "rollback").status_code == 200
        assert complete(running.url)["model"] == "tiny@1"
        assert registry.aliases("tiny")["stable"] == "1"
    finally:
        running.stop()
