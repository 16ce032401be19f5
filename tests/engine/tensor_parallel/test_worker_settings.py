"""A tensor-parallel worker is handed the engine's settings alone: no server setting, no secret, in the bytes
that travel to its process."""
from __future__ import annotations

import dataclasses
import multiprocessing
import pickle
from multiprocessing.reduction import ForkingPickler
from types import SimpleNamespace

import pytest

from autoglm import LLM
from autoglm.config import AutoGLMConfig, EngineConfig
from autoglm.config.settings import SERVER_GROUPS
from autoglm.engine.tensor_parallel import worker_group
from autoglm.engine.tensor_parallel.worker import run_worker
from tests.tiny_models import make_tiny_checkpoint

SECRETS = {"api_key": "sk-worker-must-not-see", "rate_limit_storage": "redis://:limits-password@limits:6379/0",
           "mlflow_tracking_uri": "http://mlflow-user:mlflow-password@mlflow:5000",
           "response_cache": "redis://:cache-password@cache:6379/1"}
SERVER_SETTINGS = {name for name in AutoGLMConfig.field_names()
                   if AutoGLMConfig.group_of(name) in SERVER_GROUPS}


class _Spawned(Exception):
    """Stops the start at the first worker, its target and arguments recorded."""


class _RecordingSpawn:
    """A start context whose Process records what it would start instead of starting it."""

    def __init__(self) -> None:
        self.target = None
        self.args: tuple = ()

    def set_forkserver_preload(self, module_names: list[str]) -> None:
        pass

    def Pipe(self, duplex: bool):  # noqa: N802 (multiprocessing's name)
        return multiprocessing.Pipe(duplex=duplex)

    def Process(self, target, args, name, daemon):  # noqa: N802 (multiprocessing's name)
        self.target, self.args = target, args
        raise _Spawned


def _setting_names(part: object) -> set[str]:
    """Every field name in a settings dataclass and the dataclasses inside it."""
    names = set()
    for field in dataclasses.fields(part):
        names.add(field.name)
        value = getattr(part, field.name)
        if dataclasses.is_dataclass(value):
            names |= _setting_names(value)
    return names


def test_a_worker_receives_engine_settings_without_server_settings_or_secrets(tmp_path, monkeypatch) -> None:
    spawn = _RecordingSpawn()
    monkeypatch.setattr(worker_group, "multiprocessing", SimpleNamespace(get_context=lambda method: spawn))
    model = make_tiny_checkpoint("llama", tmp_path / "llama")
    with pytest.raises(_Spawned):
        LLM(model=str(model), dtype="float32", device="cpu", tensor_parallel_size=2, served_model_name="served",
            tenants_file=str(tmp_path / "tenants.yaml"), **SECRETS)
    assert spawn.target is run_worker
    config, settings, rank, lifeline = spawn.args
    lifeline.close()
    sent = bytes(ForkingPickler.dumps((config, settings, rank)))  # what spawn pickles, the pipe aside
    for secret in (*SECRETS.values(), "served", "tenants.yaml"):
        assert secret.encode() not in sent
    received, _, _ = pickle.loads(sent)
    assert isinstance(received, EngineConfig)
    assert not _setting_names(received) & SERVER_SETTINGS
    assert received.model.model == str(model) and received.parallel.tensor_parallel_size == 2
