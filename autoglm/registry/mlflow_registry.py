"""The registry kept in MLflow's model registry: versions are MLflow model versions, aliases are MLflow aliases.

A registered checkpoint is logged as a run's plain artifacts (its config, tokenizer and weight files, not an
MLflow "flavor", so nothing beyond mlflow-skinny is needed) and becomes a model version whose tags record what
the directory registry records: the weights' SHA-256, the architecture, the size and the eval-ppl score. A
version's ``path`` is its local copy, downloaded once by ``version`` and ``resolve``; ``versions`` lists
without downloading, so its paths may not exist yet.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from autoglm.config import ConfigError
from autoglm.registry.base import STABLE_ALIAS, ModelVersion, Registry
from autoglm.registry.checkpoint import describe_checkpoint
from autoglm.registry.directory import check_identifier
from autoglm.registry.errors import RegistryError
from autoglm.registry.mlflow_downloads import default_download_root, download_folder, ensure_downloaded
from autoglm.registry.models_uri import is_models_uri, parse_models_uri

try:
    import mlflow.artifacts
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException
except ImportError:  # the optional extra is not installed; MlflowRegistry says how to install it
    mlflow = None

MLFLOW_EXTRA = "open-autoglm[mlflow]"
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_NAME = "autoglm-registry"
CHECKPOINT_ARTIFACT_PATH = "checkpoint"
SQLITE_URI_PREFIX = "sqlite:///"
SQLITE_ARTIFACTS_FOLDER = "mlartifacts"
SHA256_TAG = "autoglm.sha256"
ARCHITECTURE_TAG = "autoglm.architecture"
SIZE_TAG = "autoglm.size_bytes"
EVAL_PPL_TAG = "autoglm.eval_ppl"
BASE_SHA256_TAG = "autoglm.base_sha256"  # a LoRA adapter's base
_NOT_FOUND = "RESOURCE_DOES_NOT_EXIST"
_ALREADY_EXISTS = "RESOURCE_ALREADY_EXISTS"
_REGISTERED_MODELS_PER_PAGE = 100


class MlflowRegistry(Registry):
    """Named models and their versions in the MLflow registry at ``tracking_uri`` (a tracking server's URL,
    ``sqlite:///...`` or a file store); checkpoints are downloaded under ``download_root``."""

    def __init__(self, tracking_uri: str | None = None, download_root: Path | None = None) -> None:
        if mlflow is None:
            raise ConfigError(f"registry 'mlflow' needs the mlflow-skinny package: pip install '{MLFLOW_EXTRA}'")
        uri = tracking_uri or os.environ.get(TRACKING_URI_ENV)
        if not uri:
            raise ConfigError(
                f"registry 'mlflow' needs the store's address: set mlflow_tracking_uri (or {TRACKING_URI_ENV}) "
                "to a tracking server's URL such as http://mlflow:5000, or to sqlite:///PATH/mlflow.db"
            )
        self.tracking_uri = uri
        self.download_root = download_root or default_download_root()
        try:
            self._client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        except MlflowException as error:
            raise ConfigError(f"cannot open the MLflow registry at {uri}: {error.message}") from None

    def names(self) -> list[str]:
        models = _all_pages(lambda token: self._client.search_registered_models(
            max_results=_REGISTERED_MODELS_PER_PAGE, page_token=token))
        return sorted(model.name for model in models)

    def versions(self, name: str) -> list[ModelVersion]:
        self._registered_model(name)
        return [self._described(entry) for entry in self._version_entries(name)]

    def version(self, name: str, version: str) -> ModelVersion:
        described = self._described(self._model_version(name, version))
        ensure_downloaded(described, self._download_to(name, version))
        return described

    def aliases(self, name: str) -> dict[str, str]:
        # A SQL store gives versions as numbers, a file store or a server as strings.
        return {alias: str(version) for alias, version in self._registered_model(name).aliases.items()}

    def set_alias(self, name: str, alias: str, version: str) -> None:
        self._model_version(name, version)
        try:
            self._client.set_registered_model_alias(name, alias, version)
        except MlflowException as error:
            raise RegistryError(f"cannot point alias {alias!r} of {name!r} at version {version}: "
                                f"{error.message}") from None

    def remove_alias(self, name: str, alias: str) -> None:
        aliases = self.aliases(name)
        if alias not in aliases:
            raise RegistryError(f"model {name!r} has no alias {alias!r}; its aliases: "
                                f"{', '.join(sorted(aliases)) or 'none'}")
        self._client.delete_registered_model_alias(name, alias)

    def register(self, name: str, path: Path, version: str | None = None, notes: str = "",
                 eval_ppl: float | None = None, base_sha256: str | None = None) -> ModelVersion:
        """Upload the checkpoint and make it MLflow's next version; the first version also becomes ``stable``."""
        if version is not None:
            raise RegistryError(f"the MLflow registry numbers versions itself; register {name!r} without a "
                                f"version (asked for {version!r})")
        check_identifier("model name", name)
        facts = describe_checkpoint(path, base_sha256)
        run_id = self._log_checkpoint(name, path)
        self._ensure_registered_model(name)
        tags = {SHA256_TAG: facts.sha256, ARCHITECTURE_TAG: facts.architecture, SIZE_TAG: str(facts.size_bytes)}
        if eval_ppl is not None:
            tags[EVAL_PPL_TAG] = repr(eval_ppl)
        if base_sha256 is not None:
            tags[BASE_SHA256_TAG] = base_sha256
        created = self._client.create_model_version(
            name, source=f"runs:/{run_id}/{CHECKPOINT_ARTIFACT_PATH}", run_id=run_id, tags=tags, description=notes)
        if STABLE_ALIAS not in self.aliases(name):
            self._client.set_registered_model_alias(name, STABLE_ALIAS, created.version)
        return self._described(created)

    def resolve(self, reference: str) -> ModelVersion:
        """Also reads MLflow's ``models:/NAME/VERSION`` (that version) and ``models:/NAME@ALIAS`` (that alias)."""
        if not is_models_uri(reference):
            return super().resolve(reference)
        uri = parse_models_uri(reference)
        if uri.version is not None:
            return self.version(uri.name, uri.version)
        aliases = self.aliases(uri.name)
        if uri.alias not in aliases:
            raise RegistryError(f"model {uri.name!r} has no alias {uri.alias!r} (from {reference!r}); its aliases: "
                                f"{', '.join(sorted(aliases)) or 'none'}")
        return self.version(uri.name, aliases[uri.alias])

    def _registered_model(self, name: str) -> Any:
        try:
            return self._client.get_registered_model(name)
        except MlflowException as error:
            if error.error_code != _NOT_FOUND:
                raise
        raise RegistryError(f"no model {name!r} in the MLflow registry at {self.tracking_uri}; registered: "
                            f"{', '.join(self.names()) or 'none'}")

    def _model_version(self, name: str, version: str) -> Any:
        self._registered_model(name)
        if version.isdigit():  # MLflow numbers its versions and refuses to look up any other
            try:
                return self._client.get_model_version(name, version)
            except MlflowException as error:
                if error.error_code != _NOT_FOUND:
                    raise
        known = ", ".join(str(entry.version) for entry in self._version_entries(name)) or "none"
        raise RegistryError(f"model {name!r} has no version {version!r}; its versions: {known}")

    def _version_entries(self, name: str) -> list[Any]:
        """MLflow's records of the model's versions, oldest first."""
        found = _all_pages(lambda token: self._client.search_model_versions(
            filter_string=f"name = '{name}'", page_token=token))
        return sorted(found, key=lambda entry: int(entry.version))

    def _described(self, entry: Any) -> ModelVersion:
        """The registry's record of an MLflow model version, from the tags ``register`` wrote."""
        tags = entry.tags
        missing = [tag for tag in (SHA256_TAG, ARCHITECTURE_TAG, SIZE_TAG) if tag not in tags]
        if missing:
            raise RegistryError(
                f"{entry.name} version {entry.version} in MLflow lacks the tags {', '.join(missing)}: it was not "
                "registered by `autoglm models register`, which records the checkpoint's checksum"
            )
        sha256 = tags[SHA256_TAG]
        return ModelVersion(
            name=entry.name,
            version=str(entry.version),
            path=download_folder(self.download_root, self.tracking_uri, entry.name, str(entry.version), sha256),
            sha256=sha256,
            architecture=tags[ARCHITECTURE_TAG],
            size_bytes=int(tags[SIZE_TAG]),
            created=datetime.fromtimestamp(entry.creation_timestamp / 1000, tz=timezone.utc),
            notes=entry.description or "",
            eval_ppl=float(tags[EVAL_PPL_TAG]) if EVAL_PPL_TAG in tags else None,
            base_sha256=tags.get(BASE_SHA256_TAG),
        )

    def _download_to(self, name: str, version: str) -> Callable[[Path], Path]:
        def download(staging: Path) -> Path:
            source = self._client.get_model_version_download_uri(name, version)
            return Path(mlflow.artifacts.download_artifacts(
                artifact_uri=source, dst_path=str(staging), tracking_uri=self.tracking_uri))
        return download

    def _log_checkpoint(self, name: str, path: Path) -> str:
        """Upload the checkpoint folder as the artifacts of a new run; its id."""
        experiment = self._client.get_experiment_by_name(EXPERIMENT_NAME)
        experiment_id = experiment.experiment_id if experiment else self._client.create_experiment(
            EXPERIMENT_NAME, artifact_location=sqlite_artifact_location(self.tracking_uri))
        run = self._client.create_run(experiment_id, run_name=f"register {name}")
        self._client.log_artifacts(run.info.run_id, str(path), artifact_path=CHECKPOINT_ARTIFACT_PATH)
        self._client.set_terminated(run.info.run_id)
        return run.info.run_id

    def _ensure_registered_model(self, name: str) -> None:
        try:
            self._client.create_registered_model(name)
        except MlflowException as error:
            if error.error_code != _ALREADY_EXISTS:
                raise RegistryError(f"cannot register a model named {name!r} in MLflow: {error.message}") from None


def sqlite_artifact_location(tracking_uri: str) -> str | None:
    """For a ``sqlite:///PATH`` store, the ``mlartifacts`` folder beside the database: MLflow's own default is
    ``./mlruns`` of whatever folder the first registration ran in. None (the store decides) for any other."""
    if not tracking_uri.startswith(SQLITE_URI_PREFIX):
        return None
    database = Path(tracking_uri[len(SQLITE_URI_PREFIX):]).expanduser().resolve()
    return (database.parent / SQLITE_ARTIFACTS_FOLDER).as_uri()


def _all_pages(fetch: Callable[[str | None], Any]) -> Iterator[Any]:
    """Every result of an MLflow search, following its page tokens."""
    token = None
    while True:
        page = fetch(token)
        yield from page
        token = page.token
        if not token:
            return
