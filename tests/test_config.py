"""Settings: defaults, the three file formats, layering with the environment, and error messages."""

import json
import re
from pathlib import Path
from typing import Any

import pytest

from autoglm.config import AutoGLMConfig, ConfigError, SettingGroup
from autoglm.config.settings import parse_byte_size

NO_ENV: dict[str, str] = {}


def write_settings(path: Path, settings: dict[str, Any]) -> Path:
    """Write `settings` in the format the suffix names (JSON scalars are valid TOML and YAML scalars)."""
    if path.suffix == ".json":
        path.write_text(json.dumps(settings))
    else:
        separator = " = " if path.suffix == ".toml" else ": "
        path.write_text("".join(f"{key}{separator}{json.dumps(value)}\n" for key, value in settings.items()))
    return path


def error_of(**kwargs: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        AutoGLMConfig(**kwargs)
    return str(caught.value)


def test_defaults_and_the_constructor_the_engine_uses() -> None:
    config = AutoGLMConfig(use_paged_attention=True, block_size=16, max_context_len=8192)
    assert config == AutoGLMConfig()
    assert (config.model, config.tokenizer, config.dtype, config.device) == (None, None, "auto", "auto")
    assert (config.kv_cache_memory, config.max_num_seqs, config.max_num_batched_tokens) == ("auto", 64, 2048)
    assert config.enable_prefix_caching and config.enable_chunked_prefill
    assert (config.host, config.port, config.max_waiting_requests) == ("127.0.0.1", 8000, 256)
    assert (config.request_timeout_s, config.drain_timeout_s, config.log_stats_interval_s) == (600.0, 30.0, 10.0)


def test_field_names_lists_every_setting_in_order() -> None:
    names = AutoGLMConfig.field_names()
    assert names[:3] == ("model", "tokenizer", "served_model_name")
    assert set(names) == set(AutoGLMConfig().model_dump())


def test_settings_cannot_be_changed_after_validation() -> None:
    config = AutoGLMConfig()
    with pytest.raises(ValueError, match="frozen"):
        config.block_size = 0


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json", ".toml"])
def test_each_file_format_round_trips(tmp_path: Path, suffix: str) -> None:
    config = AutoGLMConfig(
        model="/models/tiny", dtype="bfloat16", device="cuda:1", block_size=32, max_context_len=4096,
        kv_cache_memory=0.75, enable_chunked_prefill=False, num_threads=4, seed=7, port=9000,
        drain_timeout_s=0.0,
    )
    settings = {key: value for key, value in config.model_dump().items() if value is not None}
    path = write_settings(tmp_path / f"settings{suffix}", settings)
    assert AutoGLMConfig.from_file(path, env=NO_ENV) == config


def test_empty_yaml_file_means_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("# nothing set yet\n")
    assert AutoGLMConfig.from_file(path, env=NO_ENV) == AutoGLMConfig()


def test_environment_overrides_file_and_arguments_override_both(tmp_path: Path) -> None:
    path = write_settings(tmp_path / "c.yaml", {"block_size": 8, "seed": 1, "port": 9000})
    env = {"AUTOGLM_BLOCK_SIZE": "32", "AUTOGLM_SEED": "2", "AUTOGLM_ENABLE_PREFIX_CACHING": "false"}
    config = AutoGLMConfig.from_file(path, overrides={"seed": 3, "host": None}, env=env)
    assert (config.block_size, config.seed, config.port) == (32, 3, 9000)
    assert config.enable_prefix_caching is False
    assert config.host == "127.0.0.1"  # a None override means "flag not given"


def test_from_sources_without_a_file_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOGLM_MAX_NUM_SEQS", "5")
    assert AutoGLMConfig.from_sources().max_num_seqs == 5


def test_non_setting_and_foreign_variables_are_ignored() -> None:
    env = {"AUTOGLM_HOME": "/srv/autoglm", "AUTOGLM_LOG_LEVEL": "debug", "HOME": "/root"}
    assert AutoGLMConfig.from_sources(env=env) == AutoGLMConfig()


def test_max_model_len_is_an_alias_in_files_variables_and_arguments(tmp_path: Path) -> None:
    path = write_settings(tmp_path / "c.json", {"max_model_len": 1024})
    assert AutoGLMConfig.from_file(path, env=NO_ENV).max_context_len == 1024
    assert AutoGLMConfig.from_sources(env={"AUTOGLM_MAX_MODEL_LEN": "512"}).max_context_len == 512
    assert AutoGLMConfig(max_model_len=256).max_context_len == 256
    # A later layer may use the other name.
    assert AutoGLMConfig.from_file(path, overrides={"max_context_len": 64}, env=NO_ENV).max_context_len == 64


def test_a_setting_and_its_alias_together_are_an_error(tmp_path: Path) -> None:
    path = write_settings(tmp_path / "c.yaml", {"max_context_len": 1024, "max_model_len": 2048})
    with pytest.raises(ConfigError, match="'max_context_len' is given twice"):
        AutoGLMConfig.from_file(path, env=NO_ENV)


@pytest.mark.parametrize(
    "given, dtype",
    [("fp32", "float32"), ("float", "float32"), ("bf16", "bfloat16"), ("FP16", "float16"), ("half", "float16"),
     ("bfloat16", "bfloat16")],
)
def test_dtype_aliases_become_canonical_names(given: str, dtype: str) -> None:
    assert AutoGLMConfig(dtype=given).dtype == dtype


def test_unknown_dtype_lists_the_choices() -> None:
    assert "expected one of 'auto', 'float32', 'bfloat16', 'float16'" in error_of(dtype="int8")


@pytest.mark.parametrize("given, kv_cache_dtype", [("int8", "int8"), ("FP8", "fp8_e4m3"), ("fp8_e5m2", "fp8_e5m2")])
def test_kv_cache_dtype_takes_vllm_fp8_alias(given: str, kv_cache_dtype: str) -> None:
    assert AutoGLMConfig(kv_cache_dtype=given).kv_cache_dtype == kv_cache_dtype


def test_unknown_kv_cache_dtype_lists_the_choices() -> None:
    message = error_of(kv_cache_dtype="int4")
    assert "kv_cache_dtype: got 'int4'" in message
    assert "expected one of 'auto', 'int8', 'fp8_e4m3', 'fp8_e5m2'" in message


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:3", "xpu", "xpu:0", "mps"])
def test_device_forms_accepted(device: str) -> None:
    assert AutoGLMConfig(device=device).device == device


@pytest.mark.parametrize("device", ["gpu", "cuda:", "cuda:x", "cpu:0", "CUDA"])
def test_device_forms_rejected(device: str) -> None:
    assert "'cuda:N'" in error_of(device=device)


@pytest.mark.parametrize(
    "setting, value, expected",
    [
        ("block_size", 0, "between 1 and 256"),
        ("block_size", 257, "between 1 and 256"),
        ("port", 70000, "between 1 and 65535"),
        ("max_context_len", 0, "an integer >= 1"),
        ("num_threads", 0, "an integer >= 1 or null"),
        ("request_timeout_s", 0, "a number > 0"),
        ("drain_timeout_s", -1, "a number >= 0"),
        ("tokenizer_workers", 0, "an integer >= 1"),
        ("use_paged_attention", "sometimes", "true or false"),
        ("async_scheduling", "sometimes", "expected true or false or 'auto'"),
        ("cpu_kernel_max_rows", -1, "expected an integer >= 0 or 'all' or 'auto'"),
        ("host", 5, "a string"),
    ],
)
def test_out_of_range_values_say_what_is_allowed(setting: str, value: Any, expected: str) -> None:
    assert expected in error_of(**{setting: value})


def test_bounds_are_inclusive() -> None:
    config = AutoGLMConfig(block_size=256, port=65535, drain_timeout_s=0)
    assert (config.block_size, config.port, config.drain_timeout_s) == (256, 65535, 0.0)


@pytest.mark.parametrize(
    "text, size",
    [
        ("2GiB", 2 * 1024**3),
        ("512MiB", 512 * 1024**2),
        ("1.5GB", 1_500_000_000),
        ("800MB", 800_000_000),
        ("4096", 4096),
        ("4096B", 4096),
        (" 1 kib ", 1024),
        ("3tb", 3 * 1000**4),
        ("0.5KiB", 512),
    ],
)
def test_parse_byte_size(text: str, size: int) -> None:
    assert parse_byte_size(text) == size


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("", "expected a number and a unit"),
        ("lots", "expected a number and a unit"),
        ("-1GB", "expected a number and a unit"),
        ("2G", "allowed units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"),
        ("0.1KiB", "not a whole number of bytes"),
    ],
)
def test_parse_byte_size_rejects(text: str, complaint: str) -> None:
    with pytest.raises(ConfigError, match=complaint):
        parse_byte_size(text)


@pytest.mark.parametrize(
    "given, stored",
    [("auto", "auto"), ("AUTO", "auto"), ("2GiB", 2 * 1024**3), ("4096", 4096), (4096, 4096), (0.9, 0.9),
     ("0.5", 0.5), (1.0, 1.0)],
)
def test_kv_cache_memory_is_stored_as_auto_bytes_or_fraction(given: Any, stored: Any) -> None:
    value = AutoGLMConfig(kv_cache_memory=given).kv_cache_memory
    assert value == stored and type(value) is type(stored)


@pytest.mark.parametrize("given", [0, -5, 0.0, 1.5, "1.5", True, "2G", [1]])
def test_kv_cache_memory_rejects(given: Any) -> None:
    assert error_of(kv_cache_memory=given).startswith("kv_cache_memory: got ")


def test_kv_cache_bytes() -> None:
    total = 80 * 1024**3
    assert AutoGLMConfig().engine_config().cache.kv_cache_bytes(total) is None
    assert AutoGLMConfig(kv_cache_memory="1GiB").engine_config().cache.kv_cache_bytes(None) == 1024**3
    assert AutoGLMConfig(kv_cache_memory=0.5).engine_config().cache.kv_cache_bytes(total) == 40 * 1024**3


def test_a_fraction_needs_a_device_that_reports_its_memory() -> None:
    with pytest.raises(ConfigError, match="give a size such as '4GiB'"):
        AutoGLMConfig(kv_cache_memory=0.5).engine_config().cache.kv_cache_bytes(None)


def test_paged_attention_off_turns_prefix_caching_off() -> None:
    assert AutoGLMConfig(use_paged_attention=False).enable_prefix_caching is False
    assert AutoGLMConfig(use_paged_attention=False, enable_prefix_caching=True).enable_prefix_caching is False
    assert AutoGLMConfig(enable_prefix_caching=False).enable_prefix_caching is False
    env = {"AUTOGLM_USE_PAGED_ATTENTION": "0"}
    assert AutoGLMConfig.from_sources(env=env).enable_prefix_caching is False


def test_wrong_type_in_a_file_names_file_key_value_and_expectation(tmp_path: Path) -> None:
    path = write_settings(tmp_path / "c.yaml", {"block_size": "abc"})
    with pytest.raises(ConfigError) as caught:
        AutoGLMConfig.from_file(path, env=NO_ENV)
    assert str(caught.value) == f"block_size: got 'abc' from {path}; expected an integer between 1 and 256"


def test_each_bad_setting_names_its_own_source(tmp_path: Path) -> None:
    path = write_settings(tmp_path / "c.toml", {"port": 0})
    env = {"AUTOGLM_SEED": "x"}
    with pytest.raises(ConfigError) as caught:
        AutoGLMConfig.from_file(path, overrides={"max_num_seqs": 0}, env=env)
    lines = str(caught.value).splitlines()
    assert len(lines) == 3
    assert f"port: got 0 from {path}; expected an integer between 1 and 65535" in lines
    assert "seed: got 'x' from environment variable AUTOGLM_SEED; expected an integer" in lines
    assert "max_num_seqs: got 0 from arguments; expected an integer >= 1" in lines


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="block_size: got 'abc' from arguments"):
        AutoGLMConfig(block_size="abc")


def test_unknown_key_in_a_file_suggests_the_closest(tmp_path: Path) -> None:
    path = write_settings(tmp_path / "c.yaml", {"blocksize": 32})
    with pytest.raises(ConfigError) as caught:
        AutoGLMConfig.from_file(path, env=NO_ENV)
    message = str(caught.value)
    assert message.startswith(f"unknown setting 'blocksize' in {path}; did you mean 'block_size'? Valid settings: ")
    assert "max_num_batched_tokens" in message


def test_unknown_argument_suggests_the_closest() -> None:
    assert "did you mean 'enable_prefix_caching'?" in error_of(enable_prefix_cache=True)


def test_unknown_environment_variable_is_an_error() -> None:
    with pytest.raises(ConfigError, match="environment variable AUTOGLM_BLOCKSIZE; did you mean 'block_size'"):
        AutoGLMConfig.from_sources(env={"AUTOGLM_BLOCKSIZE": "32"})


@pytest.mark.parametrize(
    "name, text, where",
    [
        ("c.yaml", "block_size: 16\nseed: [1, 2\n", "line 3"),
        ("c.json", '{"block_size": 16,\n "seed": }', "line 2"),
        ("c.toml", "block_size = 16\nseed = = 2\n", "line 2"),
    ],
)
def test_malformed_file_names_the_file_and_line(tmp_path: Path, name: str, text: str, where: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        AutoGLMConfig.from_file(path, env=NO_ENV)
    assert str(caught.value).startswith(f"malformed settings file {path}: ")
    assert where in str(caught.value)


@pytest.mark.parametrize("name, text", [("c.yaml", "- block_size\n- 16\n"), ("c.json", "[16]"), ("c.json", "16")])
def test_top_level_must_be_a_mapping(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match="must hold a mapping of setting names to values"):
        AutoGLMConfig.from_file(path, env=NO_ENV)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError, match=re.escape(f"settings file not found: {path}")):
        AutoGLMConfig.from_file(path, env=NO_ENV)


def test_unknown_suffix_lists_the_allowed_ones(tmp_path: Path) -> None:
    path = tmp_path / "c.ini"
    path.write_text("block_size = 16\n")
    with pytest.raises(ConfigError, match=r"unknown file type '\.ini'; allowed: \.yaml, \.yml, \.json, \.toml"):
        AutoGLMConfig.from_file(path, env=NO_ENV)


def test_every_setting_belongs_to_a_group() -> None:
    groups = {name: AutoGLMConfig.group_of(name) for name in AutoGLMConfig.field_names()}
    assert set(groups.values()) == set(SettingGroup)
    assert groups["block_size"] is SettingGroup.CACHE and groups["port"] is SettingGroup.SERVER


def test_defaults_sit_below_every_other_layer(tmp_path: Path) -> None:
    defaults = {"dtype": "bfloat16", "seed": 5}
    assert AutoGLMConfig.from_sources(env=NO_ENV, defaults=defaults).seed == 5
    path = write_settings(tmp_path / "c.yaml", {"dtype": "float32"})
    config = AutoGLMConfig.from_sources(path, env={"AUTOGLM_SEED": "6"}, defaults=defaults)
    assert (config.dtype, config.seed) == ("float32", 6)


@pytest.mark.parametrize("given, size", [("8MiB", 8 * 1024**2), ("3 MB", 3_000_000), (4096, 4096), ("4096", 4096)])
def test_the_body_limit_takes_sizes(given: object, size: int) -> None:
    assert AutoGLMConfig(max_request_body_bytes=given).max_request_body_bytes == size
    assert AutoGLMConfig().max_request_body_bytes == 2 * 1024**2


def test_name_lists_come_as_lists_or_comma_separated_strings(tmp_path: Path) -> None:
    path = write_settings(tmp_path / "c.yaml", {"cors_allowed_origins": ["http://a.example", "http://b.example"]})
    assert AutoGLMConfig.from_file(path, env=NO_ENV).cors_allowed_origins == ("http://a.example", "http://b.example")
    env = {"AUTOGLM_ALLOWED_HOSTS": "api.example, *.internal.example"}
    assert AutoGLMConfig.from_sources(env=env).allowed_hosts == ("api.example", "*.internal.example")
    assert (AutoGLMConfig().allowed_hosts, AutoGLMConfig().cors_allowed_origins) == (None, ())


@pytest.mark.parametrize("setting, value, expected", [
    ("allowed_hosts", [], "an empty list would refuse every request"),
    ("allowed_hosts", [3], "expected a list of names"),
    ("cors_allowed_origins", None, "expected a list of names"),
    ("max_request_body_bytes", "2 parsecs", "unknown size unit"),
])
def test_bad_server_limits_say_what_is_allowed(setting: str, value: object, expected: str) -> None:
    assert expected in error_of(**{setting: value})
