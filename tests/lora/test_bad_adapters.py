"""Adapters that do not fit the base model or the settings are refused with a message naming the adapter and the
problem, and nothing is loaded."""
from __future__ import annotations

import shutil

import pytest

from autoglm import LLM
from autoglm.errors import LoRAAdapterError, LoRAAdapterNotFoundError
from autoglm.lora_request import LoRARequest
from tests.lora.adapters import ADAPTER_SPECS, edit_adapter_config, make_adapter_for_other_base


@pytest.fixture(scope="module")
def llm(lora_case):
    return LLM(model=str(lora_case.base), dtype="float32", enable_lora=True, max_loras=1, max_lora_rank=8,
               kv_cache_memory=1 << 20)


@pytest.fixture
def copy_of(lora_case, tmp_path):
    def copy(name: str):
        return shutil.copytree(lora_case.adapters[name].lora_path, tmp_path / name)
    return copy


def refused(llm, path, error=LoRAAdapterError) -> str:
    with pytest.raises(error) as raised:
        llm.engine.add_lora(LoRARequest("bad", 7, str(path)))
    assert llm.engine.list_loras() == []
    message = str(raised.value)
    assert "'bad'" in message
    return message


def test_other_hidden_size(llm, tmp_path):
    path = make_adapter_for_other_base(tmp_path / "wide", ADAPTER_SPECS["attention"], hidden_size=96)
    assert "has shape" in refused(llm, path) and "other sizes" in refused(llm, path)


def test_unknown_target_module(llm, copy_of):
    path = copy_of("attention")
    edit_adapter_config(path, target_modules=["q_proj", "lm_head"])
    message = refused(llm, path)
    assert "lm_head" in message and "allowed: q_proj" in message


def test_target_modules_as_a_regular_expression_that_every_tensor_must_match(llm, copy_of):
    """PEFT reads a string target_modules as a regular expression a whole module name matches."""
    path = copy_of("attention")
    edit_adapter_config(path, target_modules=r".*\.(q_proj|k_proj|v_proj|o_proj)")
    llm.engine.add_lora(LoRARequest("pattern", 8, str(path)))
    assert [adapter.lora_name for adapter in llm.engine.list_loras()] == ["pattern"]
    llm.engine.remove_lora("pattern")
    edit_adapter_config(path, target_modules=r".*\.q_proj")
    assert "is not among the adapter's targets" in refused(llm, path)
    edit_adapter_config(path, target_modules="(q_proj")
    assert "target_modules '(q_proj' is not a regular expression" in refused(llm, path)


def test_rank_over_max_lora_rank(llm, lora_case):
    message = refused(llm, lora_case.adapters["everything"].lora_path)  # rank 16, max 8
    assert "rank 16 is above max_lora_rank 8" in message


def test_missing_folder_and_missing_files(llm, tmp_path, copy_of):
    assert "does not exist" in refused(llm, tmp_path / "nowhere", LoRAAdapterNotFoundError)
    path = copy_of("attention")
    (path / "adapter_model.safetensors").unlink()
    assert "no adapter_model.safetensors" in refused(llm, path, LoRAAdapterNotFoundError)
    (path / "adapter_config.json").unlink()
    assert "no adapter_config.json" in refused(llm, path, LoRAAdapterNotFoundError)


def test_pickled_weights_only(llm, copy_of):
    path = copy_of("attention")
    (path / "adapter_model.safetensors").rename(path / "adapter_model.bin")
    assert "adapter_model.bin only" in refused(llm, path)


def test_settings_that_are_not_served(llm, copy_of):
    path = copy_of("attention")
    edit_adapter_config(path, bias="all")
    assert "bias is 'all'; only 'none' is served" in refused(llm, path)


def test_a_request_for_an_adapter_not_loaded_is_refused(llm, lora_case):
    with pytest.raises(LoRAAdapterNotFoundError, match="'attention' is not loaded"):
        llm.engine.add_request("r", [5, 6, 7], lora_request=lora_case.adapters["attention"])
    assert not llm.engine.has_unfinished_requests()


def test_lora_off_refuses_adapters(lora_case):
    llm = LLM(model=str(lora_case.base), dtype="float32", kv_cache_memory=1 << 20)
    with pytest.raises(LoRAAdapterError, match="without enable_lora"):
        llm.generate([[5, 6]], use_tqdm=False, lora_request=lora_case.adapters["attention"])


def test_lora_request_of_another_type_is_refused(llm):
    with pytest.raises(ValueError, match="lora_request must be a LoRARequest, None, or a list of them; got 'sql'"):
        llm.generate([[5, 6], [7, 8]], use_tqdm=False, lora_request=[None, "sql"])
    with pytest.raises(ValueError, match="got 'sql'"):
        llm.generate([[5, 6]], use_tqdm=False, lora_request="sql")
