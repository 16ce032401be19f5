"""The MLflow registry against a real local MLflow store (SQLite in a temp folder): versions, aliases,
``models:/`` references, one checked download per version, and a registered checkpoint served by its alias."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mlflow", reason="the MLflow backend needs the open-autoglm[mlflow] extra")

import mlflow.artifacts  # noqa: E402

from autoglm.config import ConfigError  # noqa: E402
from autoglm.llm import LLM  # noqa: E402
from autoglm.registry import ChecksumMismatchError, RegistryError, verify_checksum  # noqa: E402
from autoglm.registry import mlflow_registry  # noqa: E402
from autoglm.registry.checkpoint import weights_sha256  # noqa: E402
from autoglm.registry.mlflow_registry import SQLITE_ARTIFACTS_FOLDER, MlflowRegistry  # noqa: E402
from autoglm.sampling_params import SamplingParams  # noqa: E402


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite store for the module (opening a new one migrates its schema, which takes seconds); each test
    registers models of its own name."""
    return tmp_path_factory.mktemp("mlflow-store")


@pytest.fixture(scope="module")
def registry(store: Path) -> MlflowRegistry:
    return MlflowRegistry(f"sqlite:///{store / 'mlflow.db'}", download_root=store / "downloads")


def test_versions_are_numbered_by_mlflow_and_record_the_checkpoint(registry, checkpoints):
    first = registry.register("numbered", checkpoints[0], notes="baseline", eval_ppl=12.5)
    second = registry.register("numbered", checkpoints[1])
    assert (first.version, second.version) == ("1", "2")
    assert first.sha256 == weights_sha256(checkpoints[0]) != second.sha256
    assert first.architecture == "LlamaForCausalLM" and first.size_bytes > 0
    assert (first.notes, first.eval_ppl, second.eval_ppl) == ("baseline", 12.5, None)
    assert first.created.tzinfo is not None
    assert [version.version for version in registry.versions("numbered")] == ["1", "2"]
    assert "numbered" in registry.names()


def test_the_first_version_becomes_stable_and_references_resolve(registry, checkpoints):
    registry.register("refs", checkpoints[0])
    registry.register("refs", checkpoints[1])
    registry.set_alias("refs", "canary", "2")
    assert registry.aliases("refs") == {"stable": "1", "canary": "2"}
    resolved = {reference: registry.resolve(reference).version for reference in (
        "refs", "refs@stable", "refs@canary", "refs@1", "refs@2", "models:/refs@stable", "models:/refs@canary",
        "models:/refs/2")}
    assert resolved == {"refs": "1", "refs@stable": "1", "refs@canary": "2", "refs@1": "1", "refs@2": "2",
                        "models:/refs@stable": "1", "models:/refs@canary": "2", "models:/refs/2": "2"}


def test_a_resolved_version_is_a_verified_local_copy_downloaded_once(registry, checkpoints, monkeypatch):
    registry.register("download", checkpoints[0])
    listed = registry.versions("download")[0]
    assert not listed.path.exists()  # listing downloads nothing
    resolved = registry.resolve("download@stable")
    assert resolved.path == listed.path and resolved.path.is_relative_to(registry.download_root)
    assert {file.name for file in checkpoints[0].iterdir()} <= {file.name for file in resolved.path.iterdir()}
    verify_checksum(resolved)

    def no_second_download(**_: object) -> str:
        raise AssertionError("the version was downloaded again")

    monkeypatch.setattr(mlflow.artifacts, "download_artifacts", no_second_download)
    assert registry.resolve("models:/download@stable") == resolved


def test_artifacts_changed_in_the_store_are_refused_and_nothing_is_cached(registry, store, checkpoints):
    registry.register("tampered", checkpoints[0])
    listed = registry.versions("tampered")[0]
    run_id = registry._client.get_model_version("tampered", "1").run_id
    stored_weights = list((store / SQLITE_ARTIFACTS_FOLDER).glob(f"**/{run_id}/**/*.safetensors"))
    assert stored_weights, "the checkpoint's weights were not uploaded beside the database"
    with stored_weights[0].open("r+b") as weights:
        weights.seek(-4, 2)
        weights.write(b"\0\0\0\0")
    with pytest.raises(ChecksumMismatchError, match="tampered@1: the checkpoint downloaded from MLflow is not the "
                                                    "one registered"):
        registry.resolve("tampered")
    assert not listed.path.exists() and list(listed.path.parent.iterdir()) == []


def test_a_sqlite_store_keeps_artifacts_beside_the_database_not_in_the_working_folder(tmp_path, checkpoints,
                                                                                      monkeypatch, store):
    working = tmp_path / "elsewhere"
    working.mkdir()
    monkeypatch.chdir(working)
    MlflowRegistry(f"sqlite:///{store / 'mlflow.db'}", download_root=tmp_path / "downloads").register(
        "beside", checkpoints[0])
    assert list(working.iterdir()) == []
    assert (store / SQLITE_ARTIFACTS_FOLDER).is_dir()


def test_aliases_move_and_are_removed(registry, checkpoints):
    registry.register("aliases", checkpoints[0])
    registry.register("aliases", checkpoints[1])
    registry.set_alias("aliases", "stable", "2")
    registry.set_alias("aliases", "canary", "1")
    registry.remove_alias("aliases", "canary")
    assert registry.aliases("aliases") == {"stable": "2"}
    with pytest.raises(RegistryError, match="model 'aliases' has no alias 'canary'; its aliases: stable"):
        registry.remove_alias("aliases", "canary")
    with pytest.raises(RegistryError, match="model 'aliases' has no version '7'; its versions: 1, 2"):
        registry.set_alias("aliases", "canary", "7")


def test_errors_name_what_exists(registry, checkpoints):
    registry.register("known", checkpoints[0])
    with pytest.raises(RegistryError, match=r"no model 'unknown' in the MLflow registry at sqlite:///.*; "
                                            r"registered: .*known"):
        registry.resolve("unknown")
    with pytest.raises(RegistryError, match="model 'known' has no version '3'; its versions: 1"):
        registry.version("known", "3")
    with pytest.raises(RegistryError, match="model 'known' has no version 'v1'; its versions: 1"):
        registry.version("known", "v1")
    with pytest.raises(RegistryError, match=r"model 'known' has no alias 'canary' \(from 'models:/known@canary'\); "
                                            "its aliases: stable"):
        registry.resolve("models:/known@canary")
    with pytest.raises(RegistryError, match="the MLflow registry numbers versions itself"):
        registry.register("known", checkpoints[1], version="5")
    with pytest.raises(RegistryError, match="model name 'a@b' is not allowed"):
        registry.register("a@b", checkpoints[0])


def test_a_version_not_registered_by_autoglm_is_named(registry):
    client = registry._client
    client.create_registered_model("foreign")
    client.create_model_version("foreign", source="file:///nowhere")
    with pytest.raises(RegistryError, match="foreign version 1 in MLflow lacks the tags autoglm.sha256"):
        registry.versions("foreign")


def test_the_store_comes_from_the_setting_or_mlflows_variable(monkeypatch, store):
    monkeypatch.delenv(mlflow_registry.TRACKING_URI_ENV, raising=False)
    with pytest.raises(ConfigError, match="set mlflow_tracking_uri \\(or MLFLOW_TRACKING_URI\\)"):
        MlflowRegistry(None)
    uri = f"sqlite:///{store / 'mlflow.db'}"
    monkeypatch.setenv(mlflow_registry.TRACKING_URI_ENV, uri)
    assert MlflowRegistry(None).tracking_uri == uri


def test_without_the_package_the_error_names_the_extra(monkeypatch):
    monkeypatch.setattr(mlflow_registry, "mlflow", None)
    with pytest.raises(ConfigError, match=r"pip install 'open-autoglm\[mlflow\]'"):
        MlflowRegistry("sqlite:///unused.db")


def test_the_version_an_alias_names_is_served_from_its_download(registry, checkpoints):
    registry.register("served", checkpoints[0])
    registry.register("served", checkpoints[1])
    registry.set_alias("served", "stable", "2")
    resolved = registry.resolve("models:/served@stable")
    assert resolved.reference == "served@2"
    greedy = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)

    def tokens(folder: Path) -> list[int]:
        llm = LLM(model=str(folder), dtype="float32", max_context_len=128)
        return llm.generate("To be, or not", greedy, use_tqdm=False)[0].outputs[0].token_ids

    assert tokens(resolved.path) == tokens(checkpoints[1])
