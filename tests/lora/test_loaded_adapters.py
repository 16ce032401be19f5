"""The adapters kept loaded: past max_cpu_loras the least recently used idle one goes, none goes while it has
requests (LoRACapacityError then), and names, folders and ids stay unambiguous."""
from __future__ import annotations

import pytest

from autoglm.engine.lora.loaded import LoadedAdapters
from autoglm.errors import LoRAAdapterError, LoRAAdapterNotFoundError, LoRACapacityError
from autoglm.lora_adapter import LoRAAdapter
from autoglm.lora_request import LoRARequest


def adapter(name: str, lora_int_id: int, path: str | None = None) -> LoRAAdapter:
    return LoRAAdapter(LoRARequest(name, lora_int_id, path or f"/adapters/{name}"), 8, 2.0, {}, b"")


def test_the_least_recently_used_idle_adapter_makes_room():
    loaded = LoadedAdapters(capacity=2)
    a, b = adapter("a", 1), adapter("b", 2)
    loaded.add(a)
    loaded.add(b)
    loaded.acquire(a.request)
    loaded.release("a")  # a used after b: b is the least recently used
    loaded.add(adapter("c", 3))
    assert [request.lora_name for request in loaded.requests()] == ["a", "c"]


def test_a_busy_adapter_is_never_unloaded_to_make_room():
    loaded = LoadedAdapters(capacity=1)
    a = adapter("a", 1)
    loaded.add(a)
    loaded.acquire(a.request)
    with pytest.raises(LoRACapacityError, match="all 1 loaded adapters .max_cpu_loras. have requests in flight"):
        loaded.add(adapter("b", 2))
    loaded.release("a")
    loaded.add(adapter("b", 2))
    assert [request.lora_name for request in loaded.requests()] == ["b"]


def test_names_folders_and_ids_stay_unambiguous():
    loaded = LoadedAdapters(capacity=4)
    loaded.add(adapter("a", 1))
    loaded.add(adapter("a", 1))  # the same name and folder: nothing to do
    with pytest.raises(LoRAAdapterError, match="already loaded from '/adapters/a'; unload it"):
        loaded.add(adapter("a", 5, "/elsewhere"))
    with pytest.raises(LoRAAdapterError, match="lora_int_id 1 is already 'a''s"):
        loaded.add(adapter("b", 1))
    with pytest.raises(LoRAAdapterError, match="is loaded from '/adapters/a', not '/elsewhere'"):
        loaded.lookup(LoRARequest("a", 1, "/elsewhere"))
    with pytest.raises(LoRAAdapterNotFoundError, match="'z' is not loaded; loaded: a"):
        loaded.lookup(LoRARequest("z", 9, "/z"))


def test_a_request_must_name_a_positive_id_and_a_folder():
    with pytest.raises(ValueError, match="lora_int_id must be an integer above 0"):
        LoRARequest("a", 0, "/a")
    with pytest.raises(ValueError, match="lora_path must be a folder's path"):
        LoRARequest("a", 1, "")
