"""speculative_config: vLLM's names, given as a mapping, JSON text, a flag or a variable; bad entries named."""
from __future__ import annotations

import argparse

import pytest

from autoglm.cli.settings import add_config_arguments, config_from_args
from autoglm.config import AutoGLMConfig, ConfigError
from autoglm.config.speculative import SpeculativeConfig


def test_off_by_default():
    assert AutoGLMConfig().speculative_config is None


def test_a_mapping_gets_vllm_defaults():
    spec = AutoGLMConfig(speculative_config={"method": "ngram", "num_speculative_tokens": 3}).speculative_config
    assert spec == SpeculativeConfig(method="ngram", num_speculative_tokens=3, prompt_lookup_min=2,
                                     prompt_lookup_max=4)


def test_the_flag_and_the_variable_take_json():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser)
    args = parser.parse_args(["--speculative-config", '{"method": "draft_model", "num_speculative_tokens": 2, '
                                                      '"model": "/models/small"}'])
    assert config_from_args(args).speculative_config.model == "/models/small"
    env = {"AUTOGLM_SPECULATIVE_CONFIG": '{"method": "ngram", "num_speculative_tokens": 5}'}
    assert AutoGLMConfig.from_sources(env=env).speculative_config.num_speculative_tokens == 5


@pytest.mark.parametrize("value, complaint", [
    ('{"method": "medusa", "num_speculative_tokens": 2}', "method: expected one of 'ngram', 'draft_model'"),
    ('{"method": "ngram"}', "num_speculative_tokens: field required"),
    ('{"method": "ngram", "num_speculative_tokens": 0}', "num_speculative_tokens: input should be greater than"),
    ('{"method": "ngram", "num_speculative_tokens": 2, "lookahead": 3}', "unknown entry 'lookahead'; allowed: method"),
    ('{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 5}',
     "prompt_lookup_min (5) must not exceed prompt_lookup_max (4)"),
    ('{"method": "draft_model", "num_speculative_tokens": 2}', "method 'draft_model' needs model"),
    ('{"method": "ngram", "num_speculative_tokens": 2, "model": "x"}', "model is read only by method 'draft_model'"),
    ("ngram", "expected a JSON object such as"),
    ("[1, 2]", "expected a mapping with method and num_speculative_tokens"),
])
def test_bad_values_say_what_is_wrong_and_allowed(value, complaint):
    with pytest.raises(ConfigError, match="speculative_config: got") as error:
        AutoGLMConfig(speculative_config=value)
    assert complaint in str(error.value)


def test_a_draft_model_needs_one_process():
    draft = {"method": "draft_model", "num_speculative_tokens": 2, "model": "x"}
    with pytest.raises(ConfigError, match="needs tensor_parallel_size 1; use method 'ngram'"):
        AutoGLMConfig(tensor_parallel_size=2, speculative_config=draft)
    assert AutoGLMConfig(tensor_parallel_size=2, speculative_config={"method": "ngram", "num_speculative_tokens": 2})
