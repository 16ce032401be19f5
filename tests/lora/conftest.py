"""One tiny Qwen2 base and three random PEFT adapters for every LoRA test, and their references, made once."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autoglm.lora_request import LoRARequest
from tests.engine.reference import Reference
from tests.lora.adapters import ADAPTER_SPECS, lora_request, make_adapter, make_base, peft_reference

PROMPTS = [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27], [30, 31, 32]]
NUM_NEW_TOKENS = 6


@dataclass
class LoRACase:
    base: Path
    adapters: dict[str, LoRARequest]  # by name, ids 1, 2, 3
    _references: dict[tuple[str | None, str], Reference] = field(default_factory=dict)

    def reference(self, name: str | None, quantize=None, kind: str = "float32") -> Reference:
        """transformers + PEFT's greedy continuations of PROMPTS with adapter ``name`` (None: the base alone)."""
        key = (name, kind)
        if key not in self._references:
            adapter = None if name is None else Path(self.adapters[name].lora_path)
            self._references[key] = peft_reference(self.base, adapter, PROMPTS, NUM_NEW_TOKENS, quantize)
        return self._references[key]


@pytest.fixture(scope="package")
def lora_case(tmp_path_factory) -> LoRACase:
    root = tmp_path_factory.mktemp("lora")
    base = make_base(root / "base")
    adapters = {name: lora_request(name, make_adapter(base, root / name, spec, seed=index + 1), index + 1)
                for index, (name, spec) in enumerate(ADAPTER_SPECS.items())}
    return LoRACase(base, adapters)


@pytest.fixture
def restored_threads(monkeypatch):
    """Torch's thread count, which a tensor-parallel rank 0 sets to its share of the cores, restored after."""
    from tests.engine.tensor_parallel.conftest import restored_threads as restore

    yield from restore.__wrapped__(monkeypatch)
