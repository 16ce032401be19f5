"""The precisions compared with llama.cpp: for each, the engine's weight settings that match a GGUF file type.

llama.cpp's Q8_0 and Q4_0 files quantize the output matrix (the LM head) too, so the engine's int8 and int4
runs quantize theirs.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Precision:
    name: str
    gguf_type: str  # what ``llama-quantize`` is asked for, and how the docs name the llama.cpp side
    engine_settings: dict[str, object]  # engine settings that make it read weights like the GGUF's


PRECISIONS: dict[str, Precision] = {precision.name: precision for precision in (
    Precision("bfloat16", "BF16", {"quantization": "none", "quantize_lm_head": False}),
    Precision("int8", "Q8_0", {"quantization": "w8a8", "quantize_lm_head": True}),
    Precision("int4", "Q4_0", {"quantization": "w4a8", "quantize_lm_head": True}),
)}
