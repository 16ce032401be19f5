"""What `autoglm serve` reads beyond the engine's settings: plain frozen data, one part per concern.

Built from the user's settings by `AutoGLMConfig.server_config`; the secrets (API key, storage and registry
URLs that may hold passwords) stay here and never reach an engine or its workers.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from autoglm.config.engine import EngineConfig
from autoglm.config.sources import ConfigError
from autoglm.user_data import user_data_dir


@dataclass(frozen=True)
class HttpConfig:
    """How the server listens, what it accepts, and how long it waits."""

    served_model_name: str | None  # None: the model's
    host: str
    port: int
    max_waiting_requests: int
    request_timeout_s: float
    engine_stall_timeout_s: float
    drain_timeout_s: float
    log_stats_interval_s: float
    max_request_body_bytes: int
    header_read_timeout_s: float
    body_read_timeout_s: float
    max_connections: int
    allowed_hosts: tuple[str, ...] | None
    cors_allowed_origins: tuple[str, ...]
    enable_api_docs: bool
    tokenizer_workers: int
    log_prompts: bool
    max_sequences_per_request: int


@dataclass(frozen=True)
class TenantsConfig:
    """Who may call the server, and where their limits and usage are counted."""

    tenants_file: str | None
    api_key: str | None = field(repr=False)
    rate_limit_storage: str = field(repr=False)  # a Redis URL may hold a password
    usage_db: str | None
    usage_flush_interval_s: float
    metrics_require_key: bool


@dataclass(frozen=True)
class ResponseCacheConfig:
    """Where answers of deterministic requests are kept to be served again."""

    response_cache: str | None = field(repr=False)  # None: off; a Redis URL may hold a password
    response_cache_ttl_s: float
    response_cache_max_entry_bytes: int
    response_cache_max_bytes: int


@dataclass(frozen=True)
class VersionsConfig:
    """The model registry, the versions served from it, and when a canary rolls back."""

    registry: Literal["directory", "mlflow"]
    registry_dir: str | None
    mlflow_tracking_uri: str | None = field(repr=False)  # a server URL may hold a password
    serve_models: tuple[str, ...]
    max_loaded_versions: int
    auto_rollback: bool
    auto_rollback_window_s: float
    auto_rollback_min_requests: int
    auto_rollback_max_error_rate: float
    auto_rollback_max_p99_ttft_s: float | None


# How one lora_modules entry is written, as its errors say.
LORA_MODULE_FORM = "NAME=PATH"


@dataclass(frozen=True)
class AdaptersConfig:
    """The LoRA adapters served from the start, and where adapters may be loaded from while the server runs."""

    lora_modules: dict[str, str] = field(hash=False)  # served name -> adapter folder
    allowed_lora_path: str | None  # None: no adapter loads at runtime


def parse_lora_modules(value: Any) -> dict[str, str]:
    """`value` as a mapping of served name to adapter folder: NAME=PATH entries (a list, or one comma-separated
    string as flags and variables give it), or a mapping (or its JSON text); ValueError naming the bad entry."""
    if value is None:
        return {}
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"expected a JSON object of name to adapter folder; {error}") from None
    if isinstance(value, str):
        value = [entry.strip() for entry in value.split(",") if entry.strip()]
    if isinstance(value, (list, tuple)):
        pairs = [_module_entry(entry) for entry in value]
    elif isinstance(value, Mapping):
        pairs = list(value.items())
    else:
        raise ValueError(f"expected {LORA_MODULE_FORM} entries or a mapping of name to adapter folder")
    modules: dict[str, str] = {}
    for name, path in pairs:
        if not isinstance(name, str) or not name or not isinstance(path, str) or not path:
            raise ValueError(f"an adapter needs a name and a folder, both non-empty text; got {name!r}: {path!r}")
        if name in modules:
            raise ValueError(f"the adapter name {name!r} is given twice; each adapter needs a name of its own")
        modules[name] = path
    return modules


def _module_entry(entry: object) -> tuple[object, object]:
    """One NAME=PATH entry, or vLLM's JSON form of one: {"name": NAME, "path": PATH}."""
    if isinstance(entry, str) and entry.strip().startswith("{"):
        try:
            entry = json.loads(entry)
        except json.JSONDecodeError as error:
            raise ValueError(f"expected a JSON object {{\"name\": NAME, \"path\": PATH}}; {error}") from None
    if isinstance(entry, Mapping):
        if set(entry) != {"name", "path"}:
            raise ValueError(f"an adapter entry as JSON has the keys name and path, got {', '.join(map(str, entry))}")
        return entry["name"], entry["path"]
    if not isinstance(entry, str) or "=" not in entry:
        raise ValueError(f"{entry!r} is not an adapter entry; expected {LORA_MODULE_FORM}, such as sql=/adapters/sql")
    name, _, path = entry.partition("=")
    return name.strip(), path.strip()


@dataclass(frozen=True)
class RayConfig:
    """Replicas and routing under `autoglm serve --ray`."""

    ray_min_replicas: int
    ray_max_replicas: int
    ray_target_ongoing_requests: float | None
    ray_prefix_routing: bool
    ray_prefix_routing_chars: int
    ray_metrics_port: int | None
    ray_num_gpus: float


@dataclass(frozen=True)
class ChatConfig:
    """How chat requests are rendered and how the model's thinking and tool calls are read back."""

    reasoning_parser: str | None
    tool_call_parser: str | None  # None: the one the chat template teaches
    enable_auto_tool_choice: bool
    trust_request_chat_template: bool
    chat_template_content_format: Literal["auto", "string", "openai"]


# What mm_processor_kwargs may set: the bounds of an image's area after resizing, in pixels.
IMAGE_PROCESSOR_KWARGS = ("min_pixels", "max_pixels")


def check_image_processor_kwargs(kwargs: Any) -> dict[str, int]:
    """`kwargs` as a checked mapping of IMAGE_PROCESSOR_KWARGS to positive whole numbers, min_pixels at most
    max_pixels; ValueError naming what is wrong and what is allowed. The setting and a request's field share it."""
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"expected a mapping of {' and '.join(IMAGE_PROCESSOR_KWARGS)} to whole numbers of pixels, "
                         f"such as {{\"max_pixels\": 1003520}}")
    for name, value in kwargs.items():
        if name not in IMAGE_PROCESSOR_KWARGS:
            raise ValueError(f"{name!r} is not an image processor setting this server passes on; allowed: "
                             f"{', '.join(IMAGE_PROCESSOR_KWARGS)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive whole number of pixels, not {value!r}")
    if kwargs.get("min_pixels", 0) > kwargs.get("max_pixels", kwargs.get("min_pixels", 0)):
        raise ValueError(f"min_pixels ({kwargs['min_pixels']}) must be at most max_pixels ({kwargs['max_pixels']})")
    return dict(kwargs)


@dataclass(frozen=True)
class MediaConfig:
    """How many images a prompt may carry, where they may come from, how big they may be, how they are resized."""

    limit_mm_per_prompt: int
    mm_processor_kwargs: dict[str, int] = field(hash=False)
    allowed_media_domains: tuple[str, ...]
    allowed_local_media_path: str | None
    media_fetch_timeout_s: float
    max_image_bytes: int
    max_image_pixels: int


@dataclass(frozen=True)
class StorageConfig:
    """Where and for how long the server keeps tenants' stored responses, files and batches, how much, and how many
    batch lines it runs at once."""

    data_dir: str | None
    storage_retention_days: float
    tenant_storage_bytes: int
    max_file_bytes: int
    max_file_lines: int
    responses_store: str = field(repr=False)  # 'sqlite', or a Redis URL, which may hold a password
    batch_max_lines_in_flight: int

    def folder(self) -> Path:
        """``data_dir``, else ``server`` under the user data folder."""
        return Path(self.data_dir) if self.data_dir is not None else user_data_dir() / "server"


@dataclass(frozen=True)
class ServerConfig:
    """Every setting a server reads, and the engine settings of the model it starts."""

    http: HttpConfig
    tenants: TenantsConfig
    response_cache: ResponseCacheConfig
    versions: VersionsConfig
    adapters: AdaptersConfig
    ray: RayConfig
    chat: ChatConfig
    media: MediaConfig
    storage: StorageConfig
    engine: EngineConfig

    def check_ray_rate_limits(self) -> None:
        """On Ray with several replicas, tenants' limits must be counted in one place: each replica counting in
        its own memory would give a tenant its budget once per replica. A tenants file without limits is
        refused too, since a reload can add them at any time."""
        most = self.ray.ray_max_replicas
        if most > 1 and self.tenants.tenants_file is not None and self.tenants.rate_limit_storage == "memory://":
            raise ConfigError(
                f"serving on Ray with up to {most} replicas (ray_max_replicas) and a tenants_file "
                "needs rate_limit_storage: redis://HOST:PORT[/DB], which every replica shares; with 'memory://' "
                "each replica would count the tenants' limits on its own (or set ray_max_replicas: 1)"
            )
