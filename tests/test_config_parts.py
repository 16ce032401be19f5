"""The flat settings split into the engine's and the server's parts: every setting in exactly one part, with the
value it was given, and the server's secrets in the server's part alone."""
from __future__ import annotations

import dataclasses

from autoglm.config import AutoGLMConfig, EngineConfig, ServerConfig, SettingGroup
from autoglm.config.settings import SERVER_GROUPS
from autoglm.config.speculative import SpeculativeConfig

ENGINE_PARTS_BY_GROUP = {SettingGroup.MODEL: {"model", "lora", "pooling"}, SettingGroup.DEVICE: {"device", "parallel"},
                         SettingGroup.CACHE: {"cache"}, SettingGroup.SCHEDULING: {"scheduler"}}
SECRETS = {"api_key": "sk-secret", "rate_limit_storage": "redis://:password@limits:6379/0",
           "mlflow_tracking_uri": "http://user:password@mlflow:5000", "response_cache": "redis://:password@cache:6379"}


def _leaves(config: object, path: str = "") -> dict[str, tuple[str, object]]:
    """Each setting in a part tree, by name: (the path to it, its value)."""
    found: dict[str, tuple[str, object]] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            for name, leaf in _leaves(value, f"{path}{field.name}.").items():
                assert name not in found, f"{name} is in two parts"
                found[name] = leaf
        else:
            found[field.name] = (path + field.name, value)
    return found


def test_every_engine_setting_lands_in_its_groups_part_with_its_value() -> None:
    config = AutoGLMConfig(block_size=8, max_num_seqs=3, tensor_parallel_size=2, seed=5, device="cpu",
                           speculative_config={"method": "ngram", "num_speculative_tokens": 2})
    engine = config.engine_config()
    leaves = _leaves(engine)
    assert leaves.pop("speculative") == ("speculative", SpeculativeConfig(method="ngram", num_speculative_tokens=2))
    engine_names = {name for name in AutoGLMConfig.field_names()
                    if AutoGLMConfig.group_of(name) in ENGINE_PARTS_BY_GROUP} - {"speculative_config"}
    assert set(leaves) == engine_names
    for name, (path, value) in leaves.items():
        assert path.split(".")[0] in ENGINE_PARTS_BY_GROUP[AutoGLMConfig.group_of(name)], path
        assert value == getattr(config, name), name
    assert (engine.cache.block_size, engine.scheduler.max_num_seqs, engine.parallel.tensor_parallel_size) == (8, 3, 2)


def test_every_server_setting_lands_in_the_servers_part_beside_the_engines() -> None:
    config = AutoGLMConfig(port=9000, ray_max_replicas=2, auto_rollback=True, **SECRETS)
    server = config.server_config()
    assert isinstance(server, ServerConfig) and server.engine == config.engine_config()
    leaves = {name: leaf for name, leaf in _leaves(server).items() if not leaf[0].startswith("engine.")}
    assert set(leaves) == {name for name in AutoGLMConfig.field_names()
                           if AutoGLMConfig.group_of(name) in SERVER_GROUPS}
    assert all(value == getattr(config, name) for name, (_, value) in leaves.items())
    assert (server.http.port, server.ray.ray_max_replicas, server.versions.auto_rollback) == (9000, 2, True)


def test_the_engines_part_holds_no_server_setting_and_no_part_prints_a_secret() -> None:
    config = AutoGLMConfig(**SECRETS)
    engine = config.engine_config()
    assert isinstance(engine, EngineConfig)
    assert not set(_leaves(engine)) & {name for name in AutoGLMConfig.field_names()
                                       if AutoGLMConfig.group_of(name) in SERVER_GROUPS}
    printed = repr(config.server_config())
    assert not [secret for secret in SECRETS.values() if secret in printed]
