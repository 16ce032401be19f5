"""A vLLM user's command line: the flags that mean the same here work under vLLM's spelling, and the others stop
the command saying what to write instead."""
from __future__ import annotations

import pytest

from autoglm.cli.main import build_parser, main
from autoglm.cli.settings import VLLM_REFUSED_FLAGS, config_from_args

VLLM_SERVE_LINE = [
    "serve", "--model", "/models/llama", "--max-model-len", "4096", "--served-model-name", "llama", "--tensor-parallel-size",
    "2", "--dtype", "half", "--max-num-seqs", "32", "--max-num-batched-tokens", "8192", "--enable-prefix-caching",
    "--block-size", "32", "--seed", "7", "--quantization", "int8", "--kv-cache-dtype", "fp8", "--host", "0.0.0.0",
    "--port", "9000", "--api-key", "sk-test", "--enforce-eager", "--enable-chunked-prefill", "--speculative-config",
    '{"method": "ngram", "num_speculative_tokens": 3}',
]


def test_a_vllm_serve_line_of_shared_flags_gives_the_same_settings() -> None:
    config = config_from_args(build_parser().parse_args(VLLM_SERVE_LINE))
    assert (config.model, config.max_context_len, config.served_model_name, config.tensor_parallel_size) == (
        "/models/llama", 4096, "llama", 2)
    assert (config.dtype, config.max_num_seqs, config.max_num_batched_tokens, config.enable_prefix_caching) == (
        "float16", 32, 8192, True)
    assert (config.block_size, config.seed, config.quantization, config.kv_cache_dtype) == (32, 7, "int8", "fp8_e4m3")
    assert (config.host, config.port, config.api_key, config.enforce_eager) == ("0.0.0.0", 9000, "sk-test", True)
    assert config.enable_chunked_prefill and config.speculative_config.num_speculative_tokens == 3


@pytest.mark.parametrize("path", [["serve"], ["generate", "hi"]], ids=" ".join)
def test_tp_is_short_for_tensor_parallel_size(path: list[str]) -> None:
    assert config_from_args(build_parser().parse_args([*path, "-tp", "4"])).tensor_parallel_size == 4


@pytest.mark.parametrize("path", [["serve"], ["generate", "hi"]], ids=" ".join)
def test_pp_is_short_for_pipeline_parallel_size(path: list[str]) -> None:
    assert config_from_args(build_parser().parse_args([*path, "-pp", "2"])).pipeline_parallel_size == 2


@pytest.mark.parametrize("flag", sorted(VLLM_REFUSED_FLAGS))
@pytest.mark.parametrize("path", [["serve"], ["generate", "hi"]], ids=" ".join)
def test_a_vllm_flag_without_an_equal_is_refused_naming_what_to_write(flag: str, path: list[str],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*path, flag, "1"])
    assert exit_info.value.code == 2
    assert f"error: {flag}: {VLLM_REFUSED_FLAGS[flag]}" in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(("flag", "instead"), [
    ("--gpu-memory-utilization", "write --kv-cache-memory 16GiB (a size) or --kv-cache-memory 0.5"),
    ("--trust-remote-code", "leave it out"),
    ("--swap-space", "leave it out"),
    ("--allowed-origins", "--cors-allowed-origins 'https://a.example,https://b.example'"),
])
def test_each_refusal_says_what_to_write_instead(flag: str, instead: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", flag, "0.9"])
    assert instead in " ".join(capsys.readouterr().err.split())


def test_refused_flags_stay_out_of_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help=all"])
    assert "--gpu-memory-utilization" not in capsys.readouterr().out


def test_vllm_tool_and_reasoning_flags_give_the_chat_settings() -> None:
    line = ["serve", "--enable-auto-tool-choice", "--tool-call-parser", "glm47", "--reasoning-parser", "glm45",
            "--trust-request-chat-template", "--chat-template-content-format", "openai"]
    config = config_from_args(build_parser().parse_args(line))
    assert (config.enable_auto_tool_choice, config.tool_call_parser, config.reasoning_parser) == (True, "glm47", "glm45")
    assert config.trust_request_chat_template and config.chat_template_content_format == "openai"
    assert not config_from_args(build_parser().parse_args(["serve", "--no-enable-auto-tool-choice"])
                                ).enable_auto_tool_choice
